package containerd_test

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/containerd/containerd/v2/core/remotes/docker"
	"github.com/containerd/containerd/v2/core/remotes/docker/config"
	"github.com/google/go-cmp/cmp"

	"github.com/osmhq/osm/host/containerd"
)

// resolve writes the hosts.toml files into a certs.d directory and returns, per registry, the endpoints
// containerd's own hosts-file reader (the code the CRI plugin runs for config_path) gives a pull from it, in
// the order a pull tries them: "URL caps" with " skip-verify" when TLS is not verified.
func resolve(t *testing.T, files []containerd.HostsFile, registries []string) map[string][]string {
	t.Helper()
	root := t.TempDir()
	for _, f := range files {
		rel, ok := strings.CutPrefix(f.Path, containerd.CertsDir+"/")
		if !ok {
			t.Fatalf("%s is not under %s", f.Path, containerd.CertsDir)
		}
		path := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(f.Content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	hosts := config.ConfigureHosts(context.Background(), config.HostOptions{HostDir: config.HostDirFromRoot(root)})
	out := map[string][]string{}
	for _, reg := range registries {
		rh, err := hosts(reg)
		if err != nil {
			t.Fatalf("containerd cannot configure %s: %v", reg, err)
		}
		for _, h := range rh {
			out[reg] = append(out[reg], describe(h))
		}
	}
	return out
}

func describe(h docker.RegistryHost) string {
	var caps []string
	for _, c := range []struct {
		c    docker.HostCapabilities
		name string
	}{{docker.HostCapabilityPull, "pull"}, {docker.HostCapabilityResolve, "resolve"}, {docker.HostCapabilityPush, "push"}, {docker.HostCapabilityReferrers, "referrers"}} {
		if h.Capabilities.Has(c.c) {
			caps = append(caps, c.name)
		}
	}
	s := h.Scheme + "://" + h.Host + h.Path + " " + strings.Join(caps, ",")
	if tr, ok := h.Client.Transport.(*http.Transport); ok && tr.TLSClientConfig != nil && tr.TLSClientConfig.InsecureSkipVerify {
		s += " skip-verify"
	}
	return s
}

// Endpoints as containerd reports them: a host.toml mirror entry has pull and resolve; the server line (or the
// registry itself, when there is no server line) has every capability.
const (
	all        = " pull,resolve,push,referrers"
	pr         = " pull,resolve"
	dockerHub  = "https://registry-1.docker.io/v2"
	quay       = "https://quay.io/v2" + all
	k8s        = "https://registry.k8s.io/v2" + all
	ghcr       = "https://ghcr.io/v2" + all
	hubDefault = dockerHub + pr
	hubServer  = dockerHub + all
)

// TestContainerdReadsHostsFiles is the judge of what the flags do on a node: for each flag form, the ordered
// endpoints containerd 2.2's own hosts-file reader resolves for pulls from docker.io, quay.io, registry.k8s.io
// and ghcr.io (e.g. docker.io/library/busybox, quay.io/x, registry.k8s.io/pause).
func TestContainerdReadsHostsFiles(t *testing.T) {
	registries := []string{"docker.io", "quay.io", "registry.k8s.io", "ghcr.io"}
	for _, tc := range []struct {
		name string
		args []string
		want map[string][]string
	}{{
		name: "no flags: docker.io through its own file, others direct",
		want: map[string][]string{"docker.io": {hubDefault, hubServer}, "quay.io": {quay}, "registry.k8s.io": {k8s}, "ghcr.io": {ghcr}},
	}, {
		name: "docker.io mirror without scheme gets https",
		args: []string{"-node-registry-mirrors=mirror.example.com"},
		want: map[string][]string{"docker.io": {"https://mirror.example.com/v2" + pr, hubServer}, "quay.io": {quay}, "registry.k8s.io": {k8s}, "ghcr.io": {ghcr}},
	}, {
		name: "registry=mirror entries and a subpath mirror without override_path",
		args: []string{"-node-registry-mirrors=https://b.example.com,a.example.com,registry.k8s.io=k8s-mirror.example.com/v2/proxy"},
		want: map[string][]string{
			"docker.io":       {"https://a.example.com/v2" + pr, "https://b.example.com/v2" + pr, hubServer},
			"registry.k8s.io": {"https://k8s-mirror.example.com/v2/proxy/v2" + pr, k8s},
			"quay.io":         {quay}, "ghcr.io": {ghcr},
		},
	}, {
		name: "override_path marker on a docker.io mirror",
		args: []string{"-node-registry-mirrors=https://harbor.example.com/v2/proxy-docker-io?kubermatic=override_path%3Dtrue"},
		want: map[string][]string{"docker.io": {"https://harbor.example.com/v2/proxy-docker-io" + pr, hubServer}, "quay.io": {quay}, "registry.k8s.io": {k8s}, "ghcr.io": {ghcr}},
	}, {
		name: "Harbor proxy caches per registry",
		args: []string{
			"-node-containerd-registry-mirrors=docker.io=https://harbor.example.com/v2/proxy-docker-io?kubermatic=override_path%3Dtrue",
			"-node-containerd-registry-mirrors=quay.io=https://harbor.example.com/v2/proxy-quay-io?kubermatic=override_path%3Dtrue",
			"-node-containerd-registry-mirrors=registry.k8s.io=https://harbor.example.com/v2/proxy-k8s-io?kubermatic=override_path%3Dtrue",
		},
		want: map[string][]string{
			"docker.io":       {"https://harbor.example.com/v2/proxy-docker-io" + pr, hubServer},
			"quay.io":         {"https://harbor.example.com/v2/proxy-quay-io" + pr, quay},
			"registry.k8s.io": {"https://harbor.example.com/v2/proxy-k8s-io" + pr, k8s},
			"ghcr.io":         {ghcr},
		},
	}, {
		name: "marker among other query parameters",
		args: []string{"-node-containerd-registry-mirrors=quay.io=https://harbor.example.com/v2/proxy-quay-io?zeta=1&kubermatic=override_path%3Dtrue"},
		want: map[string][]string{"docker.io": {hubDefault, hubServer}, "quay.io": {"https://harbor.example.com/v2/proxy-quay-io" + pr, quay}, "registry.k8s.io": {k8s}, "ghcr.io": {ghcr}},
	}, {
		name: "override_path=false keeps containerd's /v2 suffix",
		args: []string{"-node-containerd-registry-mirrors=quay.io=https://harbor.example.com/v2/proxy-quay-io?kubermatic=override_path%3Dfalse"},
		want: map[string][]string{"docker.io": {hubDefault, hubServer}, "quay.io": {"https://harbor.example.com/v2/proxy-quay-io/v2" + pr, quay}, "registry.k8s.io": {k8s}, "ghcr.io": {ghcr}},
	}, {
		name: "wildcard mirror is the catch-all for registries without a file (docker.io always has one)",
		args: []string{"-node-containerd-registry-mirrors=*=https://mirror.example.com"},
		want: map[string][]string{
			"docker.io": {hubDefault, hubServer},
			"quay.io":   {"https://mirror.example.com/v2" + pr, quay}, "registry.k8s.io": {"https://mirror.example.com/v2" + pr, k8s}, "ghcr.io": {"https://mirror.example.com/v2" + pr, ghcr},
		},
	}, {
		name: "_default mirror with override_path",
		args: []string{"-node-containerd-registry-mirrors=_default=https://harbor.example.com/v2/proxy?kubermatic=override_path%3Dtrue"},
		want: map[string][]string{
			"docker.io": {hubDefault, hubServer},
			"quay.io":   {"https://harbor.example.com/v2/proxy" + pr, quay}, "registry.k8s.io": {"https://harbor.example.com/v2/proxy" + pr, k8s}, "ghcr.io": {"https://harbor.example.com/v2/proxy" + pr, ghcr},
		},
	}, {
		name: "repeated flags and both mirror flags: mirrors are tried in URL order",
		args: []string{
			"-node-containerd-registry-mirrors=docker.io=https://z.example.com",
			"-node-containerd-registry-mirrors=docker.io=https://b.example.com",
			"-node-registry-mirrors=https://a.example.com",
			"-node-containerd-registry-mirrors=ghcr.io=ghcr-mirror.example.com",
		},
		want: map[string][]string{
			"docker.io": {"https://a.example.com/v2" + pr, "https://b.example.com/v2" + pr, "https://z.example.com/v2" + pr, hubServer},
			"ghcr.io":   {"https://ghcr-mirror.example.com/v2" + pr, ghcr}, "quay.io": {quay}, "registry.k8s.io": {k8s},
		},
	}, {
		name: "insecure registry without mirrors is its own host, unverified",
		args: []string{"-node-insecure-registries=quay.io,docker.io"},
		want: map[string][]string{"docker.io": {hubDefault + " skip-verify", hubServer}, "quay.io": {"https://quay.io/v2" + pr + " skip-verify", quay}, "registry.k8s.io": {k8s}, "ghcr.io": {ghcr}},
	}, {
		name: "insecure registry with an override_path mirror: the mirror is unverified too",
		args: []string{"-node-insecure-registries=ghcr.io", "-node-containerd-registry-mirrors=ghcr.io=https://harbor.example.com/v2/proxy?kubermatic=override_path%3Dtrue"},
		want: map[string][]string{"docker.io": {hubDefault, hubServer}, "ghcr.io": {"https://harbor.example.com/v2/proxy" + pr + " skip-verify", ghcr}, "quay.io": {quay}, "registry.k8s.io": {k8s}},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			_, files, err := generate(tc.args)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, resolve(t, files, registries)); diff != "" {
				t.Errorf("endpoints for %q (-want +containerd):\n%s", tc.args, diff)
			}
		})
	}
}

// TestContainerdReadsEveryUpstreamForm: for every flag form of cases.json that upstream accepts, containerd
// reads each file (a file it cannot parse falls back to no mirrors, which the first endpoint would show), no
// endpoint carries the OSM marker, and every mirror written is an endpoint containerd tries.
func TestContainerdReadsEveryUpstreamForm(t *testing.T) {
	for _, tc := range loadCases(t) {
		t.Run(tc.Name, func(t *testing.T) {
			_, files, err := generate(tc.Args)
			if err != nil {
				return // refused at start, as upstream refuses it (TestRegistryFlagsMatchUpstream)
			}
			for _, f := range files {
				host := f.Dir
				if host == "_default" {
					host = "catch-all.invalid"
				}
				got := resolve(t, files, []string{host})[host]
				// Upstream writes [host.""] for -node-insecure-registries=*; containerd skips a table without a
				// host, so that flag leaves every registry verified, on upstream's nodes and ours.
				n := strings.Count(f.Content, "[host.") - strings.Count(f.Content, `[host.""]`)
				if strings.Contains(f.Content, `[host.""]`) && strings.Contains(strings.Join(got, "\n"), "skip-verify") {
					t.Errorf("%s: a host without a name changed TLS verification: %v", f.Path, got)
				}
				if len(got) != n+1 {
					t.Errorf("%s: containerd resolved %d endpoints from %d [host] tables:\n%s\n%v", f.Path, len(got), n, f.Content, got)
				}
				for _, e := range got {
					if strings.Contains(e, "kubermatic") {
						t.Errorf("%s: endpoint %q carries the marker", f.Path, e)
					}
				}
			}
		})
	}
}
