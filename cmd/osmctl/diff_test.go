package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/osmhq/osm/sdk/abi"
)

const ubuntuMD = "../../deploy/examples/machinedeployment-ubuntu.yaml"

// templatesOnlyProfile is an upstream-style profile without a plugin; body is its provisioningConfig.
func templatesOnlyProfile(t *testing.T, version, body string) string {
	t.Helper()
	osp := `apiVersion: operatingsystemmanager.k8c.io/v1alpha1
kind: OperatingSystemProfile
metadata:
  name: osp-ubuntu
  namespace: kube-system
spec:
  osName: ubuntu
  osVersion: "24.04"
  version: ` + version + `
  supportedCloudProviders:
    - name: aws
  bootstrapConfig:
    files:
      - path: /etc/motd
        content:
          inline:
            data: "bootstrap\n"
  provisioningConfig:
` + body
	p := filepath.Join(t.TempDir(), "osp-"+version+".yaml")
	if err := os.WriteFile(p, []byte(osp), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestDiff(t *testing.T) {
	old := templatesOnlyProfile(t, "v1.0.0", `    files:
      - path: /etc/kubernetes/kubelet.env
        permissions: 644
        content:
          inline:
            data: |
              KUBELET_VERSION={{ .KubeVersion }}
              MAX_PODS=110
              LOG_LEVEL=2
      - path: /etc/osm/old.conf
        content:
          inline:
            data: "obsolete\n"
    units:
      - name: kubelet.service
        enable: true
        content: |
          [Service]
          ExecStart=/usr/bin/kubelet
        dropIns:
          - name: 10-env.conf
            content: |
              [Service]
              EnvironmentFile=/etc/kubernetes/kubelet.env
    modules:
      runcmd:
        - systemctl start kubelet
`)
	cur := templatesOnlyProfile(t, "v1.1.0", `    files:
      - path: /etc/kubernetes/kubelet.env
        permissions: 600
        content:
          inline:
            data: |
              KUBELET_VERSION={{ .KubeVersion }}
              MAX_PODS=250
              LOG_LEVEL=2
      - path: /etc/osm/new.conf
        content:
          inline:
            data: "fresh\n"
    units:
      - name: kubelet.service
        enable: false
        content: |
          [Service]
          ExecStart=/usr/bin/kubelet
        dropIns:
          - name: 10-env.conf
            content: |
              [Service]
              EnvironmentFile=-/etc/kubernetes/kubelet.env
          - name: 20-limits.conf
            content: |
              [Service]
              LimitNOFILE=1048576
    modules:
      bootcmd:
        - modprobe br_netfilter
      runcmd:
        - systemctl start kubelet
`)
	want := `--- ` + old + `: profile osp-ubuntu v1.0.0, cloud-init, templates only
+++ ` + cur + `: profile osp-ubuntu v1.1.0, cloud-init, templates only

provisioning: file /etc/kubernetes/kubelet.env changed (mode 0644 -> 0600)
--- a/etc/kubernetes/kubelet.env
+++ b/etc/kubernetes/kubelet.env
@@ -1,3 +1,3 @@
 KUBELET_VERSION=v1.33.2
-MAX_PODS=110
+MAX_PODS=250
 LOG_LEVEL=2

provisioning: file /etc/osm/new.conf added (mode 0644)
--- /dev/null
+++ b/etc/osm/new.conf
@@ -0,0 +1 @@
+fresh

provisioning: file /etc/osm/old.conf removed
--- a/etc/osm/old.conf
+++ /dev/null
@@ -1 +0,0 @@
-obsolete

provisioning: unit kubelet.service changed (enable true -> false)

provisioning: unit kubelet.service drop-in 10-env.conf changed
--- a/units/kubelet.service.d/10-env.conf
+++ b/units/kubelet.service.d/10-env.conf
@@ -1,2 +1,2 @@
 [Service]
-EnvironmentFile=/etc/kubernetes/kubelet.env
+EnvironmentFile=-/etc/kubernetes/kubelet.env

provisioning: unit kubelet.service drop-in 20-limits.conf added
--- /dev/null
+++ b/units/kubelet.service.d/20-limits.conf
@@ -0,0 +1,2 @@
+[Service]
+LimitNOFILE=1048576

provisioning: modules.bootcmd added
--- /dev/null
+++ b/modules/bootcmd
@@ -0,0 +1 @@
+modprobe br_netfilter
`
	first := osmctl(t, "diff", "-f", ubuntuMD, "--from", old, "--to", cur)
	if first.code != 1 {
		t.Fatalf("want exit status 1 for different configurations: %s", first)
	}
	body, summary, _ := strings.Cut(first.stdout, "\n\nbootstrap unchanged; provisioning: 7 change(s), user-data ")
	if diff := cmp.Diff(want, body+"\n"); diff != "" {
		t.Errorf("diff output (-want +got):\n%s", diff)
	}
	if !strings.HasSuffix(summary, " bytes\n") {
		t.Errorf("summary line missing: %q", first.stdout)
	}
	if again := osmctl(t, "diff", "-f", ubuntuMD, "--from", old, "--to", cur); again.stdout != first.stdout {
		t.Error("the output of diff is not deterministic")
	}

	t.Run("identical", func(t *testing.T) {
		r := osmctl(t, "diff", "-f", ubuntuMD, "--from", old, "--to", old)
		if r.code != 0 || !strings.HasSuffix(r.stdout, "\n\nbootstrap unchanged; provisioning unchanged\n") {
			t.Errorf("want exit 0 and no changes: %s", r)
		}
	})
	t.Run("only the stage asked for", func(t *testing.T) {
		r := osmctl(t, "diff", "-f", ubuntuMD, "--from", old, "--to", cur, "--stage", "bootstrap")
		if r.code != 0 || strings.Contains(r.stdout, "provisioning:") {
			t.Errorf("want only the (unchanged) bootstrap stage: %s", r)
		}
	})
	t.Run("render failure", func(t *testing.T) {
		broken := templatesOnlyProfile(t, "v2.0.0", "    files:\n      - path: /etc/x\n        content:\n          inline:\n            data: \"{{ .NoSuchField }}\"\n")
		r := osmctl(t, "diff", "-f", ubuntuMD, "--from", old, "--to", broken)
		assertOneLineError(t, r, "rendering workers with profile osp-ubuntu ("+broken+")")
		if r.code != 2 {
			t.Errorf("exit status %d, want 2", r.code)
		}
	})
}

// TestDiffPluginProfiles diffs two versions of a default profile rendered by the embedded debian plugin: a
// plugin config change shows up in the files the plugin writes.
func TestDiffPluginProfiles(t *testing.T) {
	requireBuiltin(t, "debian")
	data, err := os.ReadFile("../../plugins/osps/osp-debian-12.yaml")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	old := filepath.Join(dir, "old.yaml")
	cur := filepath.Join(dir, "new.yaml")
	next := strings.Replace(strings.Replace(string(data), "version: v2.0.0", "version: v2.1.0", 1),
		"    builtin: debian\n", "    builtin: debian\n    config:\n      journaldSystemMaxUse: 2G\n", 1)
	md, err := os.ReadFile(ubuntuMD)
	if err != nil {
		t.Fatal(err)
	}
	mdDebian := strings.NewReplacer("osp-ubuntu", "osp-debian-12", "operatingSystem: ubuntu", "operatingSystem: debian").Replace(string(md))
	mdFile := filepath.Join(dir, "md.yaml")
	for p, content := range map[string]string{old: string(data), cur: next, mdFile: mdDebian} {
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	r := osmctl(t, "diff", "-f", mdFile, "--from", old, "--to", cur, "--stage", "provisioning")
	want := "\nprovisioning: file /etc/systemd/journald.conf.d/90-osm.conf changed\n" +
		"--- a/etc/systemd/journald.conf.d/90-osm.conf\n+++ b/etc/systemd/journald.conf.d/90-osm.conf\n" +
		"@@ -1,2 +1,2 @@\n [Journal]\n-SystemMaxUse=5G\n+SystemMaxUse=2G\n"
	if r.code != 1 || !strings.Contains(r.stdout, want) || !strings.Contains(r.stdout, "plugin debian") {
		t.Errorf("want the journald change, exit 1: %s", r)
	}
}

func TestCompareStage(t *testing.T) {
	yes, no := true, false
	text := func(s string) *string { return &s }
	mode := func(m int32) *int32 { return &m }
	file := func(path string, m *int32, enc, data string) abi.File {
		return abi.File{Path: path, Permissions: m, Content: abi.FileContent{Inline: &abi.FileContentInline{Encoding: enc, Data: data}}}
	}
	tests := []struct {
		name     string
		from, to abi.NodeConfig
		want     []string // "object kind (notes)"
	}{
		{name: "nothing", from: abi.NodeConfig{Files: []abi.File{file("/a", nil, "", "x")}}, to: abi.NodeConfig{Files: []abi.File{file("/a", mode(644), "", "x")}}},
		{
			name: "encoding only",
			from: abi.NodeConfig{Files: []abi.File{file("/a", nil, "", "x")}},
			to:   abi.NodeConfig{Files: []abi.File{file("/a", nil, "gzip", "x")}},
			want: []string{"file /a changed (encoding plain -> gzip)"},
		},
		{
			name: "order",
			from: abi.NodeConfig{Files: []abi.File{file("/a", nil, "", "x"), file("/b", nil, "", "y"), file("/c", nil, "", "z")}},
			to:   abi.NodeConfig{Files: []abi.File{file("/b", nil, "", "y"), file("/a", nil, "", "x")}},
			want: []string{"file /c removed", "file order changed"},
		},
		{
			name: "binary content",
			from: abi.NodeConfig{Files: []abi.File{file("/bin/x", mode(755), "b64", "\x00\x01")}},
			to:   abi.NodeConfig{Files: []abi.File{file("/bin/x", mode(755), "b64", "\x00\x02\x03")}},
			want: []string{"file /bin/x changed (binary content 2 -> 3 bytes)"},
		},
		{
			name: "unit removed, masked, content",
			from: abi.NodeConfig{Units: []abi.Unit{{Name: "a.service", Content: text("x\n")}, {Name: "b.service", Mask: &no}}},
			to:   abi.NodeConfig{Units: []abi.Unit{{Name: "b.service", Mask: &yes, DropIns: []abi.DropIn{{Name: "d.conf", Content: "y\n"}}}}},
			want: []string{"unit a.service removed", "unit b.service changed (mask false -> true)", "unit b.service drop-in d.conf added"},
		},
		{
			name: "modules and keys",
			from: abi.NodeConfig{UserSSHKeys: []string{"k1"}, Modules: &abi.Modules{RunCMD: []string{"a"}, YumRepoDir: "/etc/yum", RHSubscription: map[string]string{"org": "1"}}},
			to: abi.NodeConfig{UserSSHKeys: []string{"k1", "k2"}, Modules: &abi.Modules{RunCMD: []string{"a"},
				YumRepos: map[string]map[string]string{"k8s": {"baseurl": "https://mirror.lan/k8s"}}, RHSubscription: map[string]string{"org": "2"}}},
			want: []string{"modules.rh_subscription changed", "modules.yum_repos added", "modules.yum_repo_dir removed", "user SSH keys changed"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, c := range compareStage(&tt.from, &tt.to) {
				s := c.object + " " + c.kind
				if len(c.notes) > 0 {
					s += " (" + strings.Join(c.notes, ", ") + ")"
				}
				got = append(got, s)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("changes (-want +got):\n%s", diff)
			}
		})
	}
}
