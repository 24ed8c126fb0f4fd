package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// TestParseArgs reads arguments the way Go's flag package does, with the controller's flag list.
func TestParseArgs(t *testing.T) {
	known := parseFlagList(controllerFlags)
	for _, tc := range []struct {
		name string
		in   []string
		want [][]string
	}{
		{"name=value", []string{"-cluster-dns=10.10.10.10", "--namespace=kube-system"}, [][]string{{"-cluster-dns=10.10.10.10"}, {"--namespace=kube-system"}}},
		{"name value", []string{"-node-http-proxy", "http://p:3128", "-namespace", "x"}, [][]string{{"-node-http-proxy", "http://p:3128"}, {"-namespace", "x"}}},
		{"boolean alone before a flag", []string{"-external-cloud-provider", "-pause-image", "p:1"}, [][]string{{"-external-cloud-provider"}, {"-pause-image", "p:1"}}},
		{"boolean alone before a word is not its value", []string{"-external-cloud-provider", "stray"}, [][]string{{"-external-cloud-provider"}, {"stray"}}},
		{"unknown with a value", []string{"-no-such", "v", "-namespace=x"}, [][]string{{"-no-such", "v"}, {"-namespace=x"}}},
		{"stops at --", []string{"-namespace=x", "--", "-cluster-dns=1.1.1.1"}, [][]string{{"-namespace=x"}, {"--", "-cluster-dns=1.1.1.1"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got [][]string
			for _, a := range parseArgs(tc.in, known) {
				got = append(got, a.tokens)
			}
			if !slices.EqualFunc(got, tc.want, slices.Equal[[]string]) {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

// TestMergeArgs: upstream's arguments first and all kept but unknown ones; deploy/'s only where upstream sets
// nothing and never a node setting.
func TestMergeArgs(t *testing.T) {
	known := parseFlagList(controllerFlags)
	upstream := parseArgs([]string{"-worker-count=5", "-ca-bundle", "/ca.pem", "-osm-unknown=1", "-node-http-proxy=http://p"}, known)
	deploy := parseArgs([]string{"-worker-count=10", "-cluster-dns=10.96.0.10", "-plugin-cache-dir=/var/cache/osm", "-node-no-proxy=x"}, known)
	args, report := mergeArgs(upstream, deploy)
	want := []string{"-worker-count=5", "-ca-bundle", "/ca.pem", "-node-http-proxy=http://p", "-plugin-cache-dir=/var/cache/osm"}
	if !slices.Equal(args, want) {
		t.Errorf("args %q, want %q", args, want)
	}
	text := strings.Join(report, "\n")
	for _, line := range []string{"left out:  -osm-unknown=1", "kept:      -ca-bundle /ca.pem (accepted and ignored",
		"not added: -cluster-dns=10.96.0.10 (a node setting", "not added: -node-no-proxy=x (a node setting", "added:     -plugin-cache-dir=/var/cache/osm"} {
		if !strings.Contains(text, line) {
			t.Errorf("report lacks %q:\n%s", line, text)
		}
	}
}

// TestUpstreamOverlayCommand runs the command on upstream v1.11.2's Deployment from stdin, and on what it must
// refuse.
func TestUpstreamOverlayCommand(t *testing.T) {
	upstream, err := os.ReadFile(filepath.Join("..", "..", "host", "app", "testdata", "upstream-v1.11.2", "operating-system-manager.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	r := mustSucceed(t, osmctlIn(t, strings.NewReader(string(upstream)), "upstream-overlay", "-f", "-", "--deploy", filepath.Join("..", "..", "deploy"), "-o", out))
	if !strings.Contains(r.stdout, "kept:      -cluster-dns=10.10.10.10") {
		t.Errorf("stdout:\n%s", r.stdout)
	}
	component := map[string]any{}
	data, err := os.ReadFile(filepath.Join(out, "upstream-flags", "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, &component); err != nil || component["kind"] != "Component" {
		t.Fatalf("upstream-flags/kustomization.yaml: %v\n%s", err, data)
	}
	for _, want := range []string{"value: operating-system-manager", "- /usr/local/bin/osm-controller", "- -cluster-dns=10.10.10.10"} {
		if !strings.Contains(string(data), want) {
			t.Errorf("the component lacks %q:\n%s", want, data)
		}
	}

	other := strings.Replace(string(upstream), "name: operating-system-manager\n  namespace: kube-system", "name: something-else\n  namespace: kube-system", 1)
	for _, tc := range []struct{ name, stdin, want string }{
		{"another Deployment", other, "deploy/ replaces kube-system/operating-system-manager"},
		{"not a Deployment", "apiVersion: v1\nkind: Service\nmetadata: {name: x}\n", `is a "Service", not a Deployment`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := osmctlIn(t, strings.NewReader(tc.stdin), "upstream-overlay", "-f", "-", "--deploy", filepath.Join("..", "..", "deploy"), "-o", t.TempDir())
			if r.code == 0 || !strings.Contains(r.stderr, tc.want) {
				t.Errorf("want a failure with %q, got %s", tc.want, r)
			}
		})
	}
}
