package plugins_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
	sigsyaml "sigs.k8s.io/yaml"

	osmv1alpha1 "github.com/osmhq/osm/crds/osm/v1alpha1"
	"github.com/osmhq/osm/host/encode/cloudinit"
	"github.com/osmhq/osm/host/extension"
	"github.com/osmhq/osm/host/render"
	"github.com/osmhq/osm/host/testenv"
	"github.com/osmhq/osm/plugins"
	"github.com/osmhq/osm/sdk/abi"
	"github.com/osmhq/osm/sdk/plugintest"
)

// TestSiteExtensionExample applies deploy/examples/extension-site.yaml — a site CA, an NTP server, a sysctl and
// an extra package in under 30 lines — to every default profile through the render pipeline with the built
// plugins: the Ubuntu and Debian profiles get exactly what it adds and still pass `cloud-init schema`; the other
// profiles render as without it.
func TestSiteExtensionExample(t *testing.T) {
	path := filepath.Join(testenv.RepoRoot(), "deploy", "examples", "extension-site.yaml")
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(raw), "\n"); n >= 30 {
		t.Errorf("%s has %d lines; the example promises fewer than 30", path, n)
	}
	var x osmv1alpha1.OperatingSystemProfileExtension
	if err := sigsyaml.UnmarshalStrict(raw, &x); err != nil {
		t.Fatal(err)
	}
	profiles, err := plugins.DefaultProfiles()
	if err != nil {
		t.Fatal(err)
	}
	r := &render.Renderer{Plugins: newSource(t, dist(t))}
	selected := 0
	for _, osp := range profiles {
		osp.Namespace = "kube-system"
		provider := osp.Spec.SupportedCloudProviders[0].Name
		t.Run(osp.Name, func(t *testing.T) {
			xs, err := extension.For(osp, provider, []osmv1alpha1.OperatingSystemProfileExtension{x})
			if err != nil {
				t.Fatal(err)
			}
			in := render.Input{
				MachineDeployment: machineDeployment(t, osp, provider), Profile: osp, Settings: settings(),
				Cluster: render.ClusterInfo{ServerURL: "https://api.cluster.example.com:6443", CACert: plugintest.CACert},
			}
			plain := userData(t, r, in)
			in.Extensions = xs
			extended := userData(t, r, in)
			wantSelected := osp.Spec.OSName == "ubuntu" || osp.Spec.OSName == "debian"
			if got := len(xs) == 1; got != wantSelected {
				t.Fatalf("extension selected = %v, want %v", got, wantSelected)
			}
			if !wantSelected {
				if plain != extended {
					t.Error("an extension that does not select the profile changed its user-data")
				}
				return
			}
			selected++
			validate(t, abi.UtilityCloudInit, osp.Name+" provisioning with extension", []byte(extended))
			var doc cloudinit.Document
			if err := yaml.Unmarshal([]byte(extended), &doc); err != nil {
				t.Fatal(err)
			}
			files := map[string]string{}
			for _, f := range doc.WriteFiles {
				files[f.Path] = f.Content
			}
			for _, f := range x.Spec.ProvisioningConfig.Files {
				if got, ok := files[f.Path]; !ok || got != f.Content.Inline.Data {
					t.Errorf("%s: got %q (present %v), want the extension's content", f.Path, got, ok)
				}
			}
			dropIn := "/etc/systemd/system/containerd.service.d/10-site-ca.conf"
			if !strings.Contains(files[dropIn], "ExecStartPre=/usr/sbin/update-ca-certificates") {
				t.Errorf("containerd drop-in %s missing or wrong: %q", dropIn, files[dropIn])
			}
			if !slices.Contains(doc.RunCMD, "systemctl enable --now containerd.service") {
				t.Errorf("the profile's own containerd.service was lost when the extension added a drop-in to it:\n%s", strings.Join(doc.RunCMD, "\n"))
			}
			setup := slices.IndexFunc(doc.RunCMD, func(s string) bool { return strings.Contains(s, "osm-setup") })
			pkg := slices.IndexFunc(doc.RunCMD, func(s string) bool {
				return strings.Contains(s, "apt-get install -y --no-install-recommends nfs-common")
			})
			if setup < 0 || pkg < 0 || pkg < setup {
				t.Errorf("runcmd: the extension's lines must follow the profile's (osm-setup at %d, package at %d):\n%s", setup, pkg, strings.Join(doc.RunCMD, "\n"))
			}
		})
	}
	if selected != 4 {
		t.Errorf("the example selected %d default profiles, want the 4 Ubuntu and Debian ones", selected)
	}
}

func userData(t *testing.T, r *render.Renderer, in render.Input) string {
	t.Helper()
	out, err := r.Render(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	data, err := out.UserData(context.Background(), abi.StageProvisioning, secrets)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// TestExtensionConflictsAndPipeline renders the default Ubuntu profile with extensions that collide with the
// profile and with each other, and with a profile pipeline of two plugins: a collision fails the render with
// the ExtensionConflict reason naming both sides unless the later extension declares the override, and a
// pipeline plugin sees what the one before it returned.
func TestExtensionConflictsAndPipeline(t *testing.T) {
	profiles, err := plugins.DefaultProfiles()
	if err != nil {
		t.Fatal(err)
	}
	var osp *osmv1alpha1.OperatingSystemProfile
	for _, p := range profiles {
		if p.Name == "osp-ubuntu" {
			osp = p
		}
	}
	osp.Namespace = "kube-system"
	r := &render.Renderer{Plugins: newSource(t, dist(t))}
	in := render.Input{
		MachineDeployment: machineDeployment(t, osp, "aws"), Profile: osp, Settings: settings(),
		Cluster: render.ClusterInfo{ServerURL: "https://api.cluster.example.com:6443", CACert: plugintest.CACert},
	}
	file := func(path, data string) osmv1alpha1.File {
		return osmv1alpha1.File{Path: path, Content: osmv1alpha1.FileContent{Inline: &osmv1alpha1.FileContentInline{Data: data}}}
	}
	mk := func(name string, order int32, overrides []string, files ...osmv1alpha1.File) osmv1alpha1.OperatingSystemProfileExtension {
		x := osmv1alpha1.OperatingSystemProfileExtension{Spec: osmv1alpha1.OperatingSystemProfileExtensionSpec{
			Order: order, ProvisioningConfig: &osmv1alpha1.ExtensionConfig{Files: files, Overrides: overrides},
		}}
		x.Name, x.Namespace = name, "kube-system"
		return x
	}
	for _, tc := range []struct {
		name     string
		xs       []osmv1alpha1.OperatingSystemProfileExtension
		wantErr  []string // substrings of the error; none means the render succeeds
		wantFile string   // content of /etc/containerd/config.toml when it succeeds
	}{
		{name: "collides with the profile",
			xs:      []osmv1alpha1.OperatingSystemProfileExtension{mk("site", 0, nil, file("/etc/containerd/config.toml", "site"))},
			wantErr: []string{`extension "site"`, "/etc/containerd/config.toml", "the profile", "spec.provisioningConfig.overrides"}},
		{name: "declared override", wantFile: "site",
			xs: []osmv1alpha1.OperatingSystemProfileExtension{mk("site", 0, []string{"/etc/containerd/config.toml"}, file("/etc/containerd/config.toml", "site"))}},
		{name: "two extensions, order decides who conflicts",
			xs: []osmv1alpha1.OperatingSystemProfileExtension{
				mk("zz-first", -1, nil, file("/etc/site.conf", "a")), mk("aa-second", 5, nil, file("/etc/site.conf", "b"))},
			wantErr: []string{`extension "aa-second"`, `extension "zz-first"`, "/etc/site.conf"}},
		{name: "later extension overrides an earlier one", wantFile: "b",
			xs: []osmv1alpha1.OperatingSystemProfileExtension{
				mk("a", 0, []string{"/etc/containerd/config.toml"}, file("/etc/containerd/config.toml", "a")),
				mk("b", 1, []string{"/etc/containerd/config.toml"}, file("/etc/containerd/config.toml", "b"))}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			xs, err := extension.For(osp, "aws", tc.xs)
			if err != nil {
				t.Fatal(err)
			}
			in := in
			in.Extensions = xs
			out, err := r.Render(context.Background(), in)
			if len(tc.wantErr) > 0 {
				if err == nil {
					t.Fatal("render succeeded, want a conflict")
				}
				if got := render.Reason(err); got != osmv1alpha1.ReasonExtensionConflict {
					t.Errorf("reason %q, want %q", got, osmv1alpha1.ReasonExtensionConflict)
				}
				for _, want := range tc.wantErr {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("error %q does not mention %q", err, want)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if f := out.Stage(abi.StageProvisioning).File("/etc/containerd/config.toml"); f == nil || f.Content.Inline.Data != tc.wantFile {
				t.Errorf("config.toml = %+v, want %q", f, tc.wantFile)
			}
			var names []string
			for _, a := range out.Extensions {
				names = append(names, a.Name)
			}
			var want []string
			for _, x := range xs {
				want = append(want, x.Name)
			}
			if !slices.Equal(names, want) {
				t.Errorf("applied extensions %v, want %v", names, want)
			}
		})
	}

	t.Run("profile pipeline", func(t *testing.T) {
		// The second step runs the same OS plugin again with other config: it receives the first step's output
		// and must return it changed only where its config says.
		p := osp.DeepCopy()
		p.Spec.Plugins = []osmv1alpha1.PluginReference{{Builtin: "ubuntu", Config: map[string]string{"extraPackages": "nfs-common"}}}
		in := in
		in.Profile = p
		out, err := r.Render(context.Background(), in)
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Pipeline) != 1 || out.Pipeline[0].Name != "ubuntu" {
			t.Errorf("pipeline identities %+v, want the ubuntu plugin", out.Pipeline)
		}
		data, err := out.UserData(context.Background(), abi.StageProvisioning, secrets)
		if err != nil {
			t.Fatal(err)
		}
		validate(t, abi.UtilityCloudInit, "pipeline", data)
		if !strings.Contains(string(data), "nfs-common") {
			t.Error("the second plugin's config did not reach the output")
		}
	})
}
