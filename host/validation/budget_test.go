package validation_test

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	clusterv1alpha1 "github.com/osmhq/osm/crds/cluster/v1alpha1"
	osmv1alpha1 "github.com/osmhq/osm/crds/osm/v1alpha1"
	"github.com/osmhq/osm/host/render"
	"github.com/osmhq/osm/host/templates"
	"github.com/osmhq/osm/host/testenv"
	"github.com/osmhq/osm/host/validation"
)

func machineDeployment(t *testing.T, name, osp string) *clusterv1alpha1.MachineDeployment {
	t.Helper()
	raw, err := json.Marshal(map[string]any{"cloudProvider": "aws", "cloudProviderSpec": map[string]any{},
		"operatingSystem": "ubuntu", "operatingSystemSpec": map[string]any{}, "sshPublicKeys": []string{"ssh-ed25519 AAAA x"}})
	if err != nil {
		t.Fatal(err)
	}
	return &clusterv1alpha1.MachineDeployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "kube-system",
			Annotations: map[string]string{clusterv1alpha1.AnnotationOSP: osp, clusterv1alpha1.AnnotationRevision: "1"}},
		Spec: clusterv1alpha1.MachineDeploymentSpec{Template: clusterv1alpha1.MachineTemplateSpec{Spec: clusterv1alpha1.MachineSpec{
			ProviderSpec: clusterv1alpha1.ProviderSpec{Value: &runtime.RawExtension{Raw: raw}},
			Versions:     clusterv1alpha1.MachineVersionInfo{Kubelet: "1.33.0"},
		}}},
	}
}

// TestMachineDeploymentBranchFailsOnlyThatMachineDeployment: a template that is harmless for the admission's
// sample machine but would exhaust memory for one MachineDeployment is admitted (no trial can find it), and
// at reconcile the same budget as at admission turns it into a template error for that MachineDeployment only.
func TestMachineDeploymentBranchFailsOnlyThatMachineDeployment(t *testing.T) {
	osp := profile(t, "osp-minimal.yaml")
	osp.Spec.ProvisioningConfig.Files[0].Content.Inline.Data =
		`{{ if eq .MachineDeploymentName "victim" }}{{ repeat 3000000000 "x" }}{{ else }}hello{{ end }}`
	if errs := (&validation.ProfileValidator{Settings: render.DefaultSettings()}).Validate(context.Background(), osp); len(errs) > 0 {
		t.Fatalf("not admitted: %v", errs.ToAggregate())
	}
	r := &render.Renderer{}
	in := render.Input{Profile: osp, Settings: render.DefaultSettings(),
		Cluster: render.ClusterInfo{ServerURL: "https://api.example:6443", CACert: "-----BEGIN CERTIFICATE-----\nx\n-----END CERTIFICATE-----\n"}}
	in.MachineDeployment = machineDeployment(t, "victim", osp.Name)
	start := time.Now()
	_, err := r.Render(context.Background(), in)
	var le *templates.LimitError
	if !errors.As(err, &le) || le.Limit != "ValueBytes" || render.Reason(err) != osmv1alpha1.ReasonTemplateError ||
		!strings.Contains(err.Error(), "spec.provisioningConfig.files[0].content.inline.data (/etc/motd)") {
		t.Fatalf("victim: reason %s, error %v", render.Reason(err), err)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("took %s", took)
	}
	in.MachineDeployment = machineDeployment(t, "neighbour", osp.Name)
	if _, err := r.Render(context.Background(), in); err != nil {
		t.Fatalf("neighbour: %v", err)
	}
}

// TestTrialRenderHonoursCancellation: an admission request that was cancelled stops the trial render.
func TestTrialRenderHonoursCancellation(t *testing.T) {
	osp := profile(t, "osp-minimal.yaml")
	osp.Spec.ProvisioningConfig.Templates["greeting"] = "{{ range 100000 }}{{ end }}"
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	errs := (&validation.ProfileValidator{Settings: render.DefaultSettings()}).Validate(ctx, osp)
	if msg := errs.ToAggregate(); msg == nil || !strings.Contains(msg.Error(), "context canceled") {
		t.Fatalf("errors = %v", msg)
	}
}

// TestUpstreamProfilesHaveHeadroom renders upstream's template-heavy profiles for every cloud provider through
// the admission's trial render with a tenth of every limit: the default limits leave ten times what the
// largest real profiles use.
func TestUpstreamProfilesHaveHeadroom(t *testing.T) {
	lim := templates.DefaultLimits()
	lim.Timeout /= 10
	lim.Steps /= 10
	lim.WorkBytes /= 10
	lim.CallDepth /= 10
	lim.Nesting /= 10
	lim.OutputBytes /= 10
	lim.StageOutputBytes /= 10
	lim.ValueBytes /= 10
	lim.ValueDepth /= 10
	lim.ProductWork /= 10
	ctx := templates.WithLimits(context.Background(), lim)
	files, _ := filepath.Glob(filepath.Join(testenv.RepoRoot(), "crds", "testdata", "upstream", "osp-*.yaml"))
	if len(files) == 0 {
		t.Fatal("no upstream profiles")
	}
	v := &validation.ProfileValidator{Settings: render.DefaultSettings()}
	for _, f := range files {
		osp := profile(t, filepath.Join("upstream", filepath.Base(f)))
		if errs := v.Validate(ctx, osp); len(errs) > 0 {
			t.Errorf("%s: %v", filepath.Base(f), errs.ToAggregate())
		}
	}
	// The tightened limits do bind: the same check fails a profile over them.
	osp := profile(t, "osp-minimal.yaml")
	osp.Spec.ProvisioningConfig.Templates["greeting"] = `{{ repeat 200000 "x" }}`
	if errs := v.Validate(ctx, osp); len(errs) == 0 || !strings.Contains(errs.ToAggregate().Error(), "ValueBytes") {
		t.Errorf("a value over a tenth of the limit passed: %v", errs.ToAggregate())
	}
}

// TestInsecureDownloadsWarn: curl -k and friends lint with a warning naming the field, upstream's profiles
// included, and the profile stays valid.
func TestInsecureDownloadsWarn(t *testing.T) {
	amzn2 := profile(t, filepath.Join("upstream", "osp-amzn2.yaml"))
	warnings := strings.Join(validation.Warnings(amzn2), "\n")
	if !strings.Contains(warnings, "spec.bootstrapConfig.files[1].content.inline.data: curl -k turns off TLS certificate verification") {
		t.Errorf("upstream amzn2 fetches its credentials with curl -k, warnings:\n%s", warnings)
	}
	for _, tc := range []struct {
		text string
		want []string
	}{
		{"curl -s -k -v https://x", []string{"curl -k"}},
		{"curl -fsSLk https://x | sh", []string{"curl -k"}},
		{"  /usr/bin/curl --insecure \\\n   https://x", []string{"curl --insecure"}},
		{`x=$(curl {{ if .Insecure }}-k{{ end }} https://x)`, []string{"curl -k"}},
		{"wget --no-check-certificate -O - https://x", []string{"wget --no-check-certificate"}},
		{"curl --proxy-insecure https://x && wget -q https://y", []string{"curl --proxy-insecure"}},
		{"curl -fsSL https://x; tar -xkf y.tar", nil},
		{"curl -fsSLo /opt/k https://x", nil},
		{"echo curl is not used with -k here", nil},
		{"kubectl get nodes -k", nil},
		{"X=1 sudo curl -k https://x", []string{"curl -k"}},
		{"echo `curl -k https://x`", []string{"curl -k"}},
	} {
		osp := profile(t, "osp-minimal.yaml")
		osp.Spec.BootstrapConfig.Units[0].Content = ptr.To(tc.text)
		got := validation.Warnings(osp)
		if len(got) != len(tc.want) {
			t.Errorf("%q: warnings %q, want %q", tc.text, got, tc.want)
			continue
		}
		for i, w := range tc.want {
			if !strings.HasPrefix(got[i], "spec.bootstrapConfig.units[0].content: "+w+" turns off") {
				t.Errorf("%q: warning %q, want one about %s", tc.text, got[i], w)
			}
		}
	}
}
