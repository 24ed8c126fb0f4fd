package main

import (
	"os"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	osmv1alpha1 "github.com/osmhq/osm/crds/osm/v1alpha1"
)

// TestProfileExport: an operator's first hour. `profile list` names every embedded default profile,
// `profile export` prints one as shipped (comments included) and with --namespace one kubectl can apply, and a
// misspelt name or flag gets a one-line error naming what was meant, without a stack trace.
func TestProfileExport(t *testing.T) {
	list := mustSucceed(t, osmctl(t, "profile", "list"))
	for _, name := range []string{"osp-ubuntu", "osp-debian-12", "osp-flatcar", "osp-amzn2"} {
		if !strings.Contains(list.stdout, name+" ") {
			t.Errorf("profile list lacks %s:\n%s", name, list.stdout)
		}
	}
	want, err := os.ReadFile("../../plugins/osps/osp-ubuntu.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if got := mustSucceed(t, osmctl(t, "profile", "export", "osp-ubuntu")).stdout; got != string(want) {
		t.Errorf("export differs from the shipped file")
	}
	out := mustSucceed(t, osmctl(t, "profile", "export", "osp-debian", "-n", "kube-system")).stdout
	osp := &osmv1alpha1.OperatingSystemProfile{}
	if err := yaml.UnmarshalStrict([]byte(out), osp); err != nil || osp.Namespace != "kube-system" || osp.Name != "osp-debian" {
		t.Errorf("export --namespace: %v %s/%s", err, osp.Namespace, osp.Name)
	}

	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"profile", "export", "osp-ubunt"}, "did you mean osp-ubuntu?"},
		{[]string{"render", "--stag", "provisioning"}, "unknown flag: --stag; did you mean --stage?"},
		{[]string{"diff", "--form", "a.yaml"}, "did you mean --from?"},
		{[]string{"rendr"}, `unknown command "rendr"`},
	} {
		r := osmctl(t, tt.args...)
		if r.code == 0 || !strings.Contains(r.stderr, tt.want) || strings.Contains(r.stderr, "goroutine") || strings.Count(strings.TrimSpace(r.stderr), "\n") > 0 {
			t.Errorf("osmctl %s: want one line with %q, got %s", strings.Join(tt.args, " "), tt.want, r)
		}
	}
}
