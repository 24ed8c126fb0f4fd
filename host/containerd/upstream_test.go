package containerd_test

import (
	"encoding/json"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/osmhq/osm/host/containerd"
)

// flagCase is one entry of testdata/upstream/cases.json: controller arguments and the name of the file that
// holds upstream OSM's output for them.
type flagCase struct {
	Name string   `json:"name"`
	Args []string `json:"args"`
}

func loadCases(t *testing.T) []flagCase {
	t.Helper()
	data, err := os.ReadFile("testdata/upstream/cases.json")
	if err != nil {
		t.Fatal(err)
	}
	var cases []flagCase
	if err := json.Unmarshal(data, &cases); err != nil {
		t.Fatal(err)
	}
	if len(cases) == 0 {
		t.Fatal("no cases in testdata/upstream/cases.json")
	}
	return cases
}

// optionsFromArgs parses the arguments the way the controller does (same flag bindings).
func optionsFromArgs(args []string) (containerd.Options, error) {
	fs := flag.NewFlagSet("osm-controller", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var reg containerd.RegistryFlags
	reg.AddFlags(fs)
	var opts containerd.Options
	fs.StringVar(&opts.PauseImage, "pause-image", "", "")
	if err := fs.Parse(args); err != nil {
		return opts, err
	}
	return opts, reg.Apply(&opts)
}

// generate renders config.toml and the hosts.toml files for the arguments in the fixtures' layout: a
// "=== <path>" line before each file; "=== error" when the arguments are refused.
func generate(args []string) (string, []containerd.HostsFile, error) {
	opts, err := optionsFromArgs(args)
	if err != nil {
		return "=== error\n", nil, err
	}
	cfg, err := containerd.ConfigTOML(opts)
	if err != nil {
		return "", nil, err
	}
	files, err := containerd.HostsFiles(opts)
	if err != nil {
		return "=== error\n", nil, err
	}
	var b strings.Builder
	b.WriteString("=== /etc/containerd/config.toml\n" + cfg)
	for _, f := range files {
		b.WriteString("=== " + f.Path + "\n" + f.Content)
	}
	return b.String(), files, nil
}

// TestRegistryFlagsMatchUpstream checks every flag form in cases.json against upstream OSM v1.11.2's output
// for the same arguments, byte for byte (see testdata/upstream/README.md for how the fixtures were made).
func TestRegistryFlagsMatchUpstream(t *testing.T) {
	for _, tc := range loadCases(t) {
		t.Run(tc.Name, func(t *testing.T) {
			want, err := os.ReadFile(filepath.Join("testdata/upstream", tc.Name+".golden"))
			if err != nil {
				t.Fatal(err)
			}
			got, files, genErr := generate(tc.Args)
			if diff := cmp.Diff(string(want), got); diff != "" {
				t.Errorf("args %q (-upstream +ours):\n%s", tc.Args, diff)
			}
			if string(want) == "=== error\n" && genErr == nil {
				t.Errorf("args %q accepted, upstream refuses them", tc.Args)
			}
			for _, f := range files {
				if f.Path != containerd.CertsDir+"/"+f.Dir+"/hosts.toml" {
					t.Errorf("file %s has Dir %q", f.Path, f.Dir)
				}
			}
		})
	}
}

// TestRegistryFlagErrorsNameTheValue: refused values fail with a message that names them.
func TestRegistryFlagErrorsNameTheValue(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-node-containerd-registry-mirrors=mirror.example.com"}, `"mirror.example.com" is not registry=mirror`},
		{[]string{"-node-containerd-registry-mirrors==https://m.example.com"}, `"=https://m.example.com" has no registry`},
		{[]string{"-node-containerd-registry-mirrors=quay.io="}, `"quay.io=" has no mirror`},
		{[]string{"-node-registry-mirrors=ok.example.com,https://bad host"}, `-node-registry-mirrors: "https://bad host" is not a URL`},
	} {
		_, err := optionsFromArgs(tc.args)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("args %q: error %v, want one containing %q", tc.args, err, tc.want)
		}
	}
}

// TestHostsFilesDoNotChangeOptions: rendering twice gives the same files and leaves the flag values as they
// were (the controller renders many MachineDeployments from one Options).
func TestHostsFilesDoNotChangeOptions(t *testing.T) {
	const marked = "https://harbor.example.com/v2/proxy-quay-io?kubermatic=override_path%3Dtrue"
	opts := containerd.Options{
		RegistryMirrors:           []string{"quay.io=" + marked},
		ContainerdRegistryMirrors: map[string][]string{"quay.io": {marked}},
	}
	first, err := containerd.HostsFiles(opts)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		again, err := containerd.HostsFiles(opts)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(first, again); diff != "" {
			t.Fatalf("second render differs:\n%s", diff)
		}
	}
	if !cmp.Equal(opts.ContainerdRegistryMirrors["quay.io"], []string{marked}) || opts.RegistryMirrors[0] != "quay.io="+marked {
		t.Errorf("options changed: %v %v", opts.RegistryMirrors, opts.ContainerdRegistryMirrors)
	}
}
