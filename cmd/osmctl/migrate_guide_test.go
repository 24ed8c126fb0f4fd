package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	osmv1alpha1 "github.com/osmhq/osm/crds/osm/v1alpha1"
)

// capturedUpstream is what upstream OSM v1.11.2 wrote into a cluster (hack/capture-upstream).
const capturedUpstream = "../../host/app/testdata/upstream-v1.11.2"

// TestMigrationGuideDiff runs docs/migration.md's "what changes on the nodes" step for every MachineDeployment
// of the captured cluster: `osmctl diff` of upstream's default profile against OSM's (osmctl profile export),
// with upstream's default cluster DNS, and checks every difference the guide's table names. Every osmctl
// command line of the guide parses.
func TestMigrationGuideDiff(t *testing.T) {
	guide, err := os.ReadFile("../../docs/migration.md")
	if err != nil {
		t.Fatal(err)
	}
	commands := checkGuideCommands(t, string(guide), false)
	if commands < 4 {
		t.Errorf("the guide shows %d osmctl commands, want the diff step and the way back", commands)
	}

	dir := t.TempDir()
	mds := map[string]string{}
	data, err := os.ReadFile(filepath.Join(capturedUpstream, "capture", "40-machinedeployments.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range bytes.Split(data, []byte("\n---")) {
		var md struct {
			Metadata struct {
				Name        string
				Annotations map[string]string
			}
		}
		if err := yaml.Unmarshal(doc, &md); err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, md.Metadata.Name+".yaml")
		if err := os.WriteFile(path, doc, 0o600); err != nil {
			t.Fatal(err)
		}
		mds[path] = md.Metadata.Annotations["k8c.io/operating-system-profile"]
	}
	if len(mds) != 6 {
		t.Fatalf("the capture holds %d MachineDeployments, want 6", len(mds))
	}
	every := []string{
		"bootstrap: file /opt/bin/bootstrap removed", "bootstrap: file /opt/bin/osm-bootstrap added",
		"bootstrap: file /opt/bin/supervise.sh removed", "bootstrap: unit osm-bootstrap.service added",
		"bootstrap: file /etc/kubernetes/pki/ca.crt added",
		"provisioning: file /opt/bin/setup removed", "provisioning: file /opt/bin/osm-setup added",
		"provisioning: file /opt/bin/setup_net_env.sh removed", "provisioning: file /opt/bin/osm-node-env added",
		"provisioning: file /opt/load-kernel-modules.sh removed", "provisioning: file /etc/modules-load.d/osm-kubernetes.conf added",
		"provisioning: file /etc/sysctl.d/90-osm-kubernetes.conf added", "provisioning: unit swap.target added (mask true)",
		"provisioning: file /opt/bin/health-monitor.sh removed", "provisioning: file /etc/systemd/system/kubelet-healthcheck.service removed",
		"provisioning: file /opt/bin/osm-health-monitor added", "provisioning: unit osm-health-monitor.timer added",
		"provisioning: unit osm-setup.service added", "provisioning: file /etc/kubernetes/bootstrap-kubelet.conf added",
		`+  "resolvConf": "/etc/kubernetes/resolv.conf"`, "ln -sfn /run/systemd/resolve/resolv.conf /etc/kubernetes/resolv.conf",
	}
	byProfile := map[string]struct {
		want, not []string
		osVersion [2]string
	}{
		"osp-ubuntu": {want: []string{"-resolvConf: /run/systemd/resolve/resolv.conf", "bootstrap: file /etc/systemd/system/bootstrap.service removed",
			"provisioning: file /opt/disable-swap.sh removed"}, osVersion: [2]string{"24.04", "24.04"}},
		"osp-flatcar": {want: []string{"-resolvConf: /run/systemd/resolve/resolv.conf", "provisioning: file /etc/ssh/sshd_config removed",
			"-PasswordAuthentication no", "-ClientAliveInterval 180", "bootstrap: file /etc/systemd/network/static.network removed",
			"provisioning: file /etc/systemd/network/zz-default.network.d/ipv6-fix.conf removed", "bootstrap: unit bootstrap.service removed"},
			osVersion: [2]string{"2983.2.0", "4230.2.0"}},
		"osp-rhel": {want: []string{"provisioning: file /etc/selinux/config removed", "-SELINUX=permissive", "SELinux permissive, now and after reboots",
			"bootstrap: file /etc/systemd/system/bootstrap.service removed", "provisioning: file /opt/disable-swap.sh removed"},
			not: []string{"-resolvConf"}, osVersion: [2]string{"9.5", "9"}},
		"osp-rockylinux": {want: []string{"bootstrap: file /etc/systemd/system/bootstrap.service removed", "provisioning: file /opt/disable-swap.sh removed"},
			not: []string{"-resolvConf"}, osVersion: [2]string{"9.6", "9"}},
	}
	for md, profile := range mds {
		t.Run(filepath.Base(md), func(t *testing.T) {
			exported := mustSucceed(t, osmctl(t, "profile", "export", profile))
			ours := filepath.Join(dir, "osm-"+profile+".yaml")
			if err := os.WriteFile(ours, []byte(exported.stdout), 0o600); err != nil {
				t.Fatal(err)
			}
			upstream := filepath.Join(capturedUpstream, "osps", profile+".yaml")
			r := osmctl(t, "diff", "-f", md, "--from", upstream, "--to", ours, "--cluster-dns=10.10.10.10")
			if r.code != 1 {
				t.Fatalf("osmctl diff: %s", r)
			}
			spec := byProfile[profile]
			for _, want := range append(append([]string{}, every...), spec.want...) {
				if !strings.Contains(r.stdout, want) {
					t.Errorf("the diff does not show %q", want)
				}
			}
			for _, not := range spec.not {
				if strings.Contains(r.stdout, not) {
					t.Errorf("the diff shows %q", not)
				}
			}
			for i, file := range []string{upstream, ours} {
				osp := &osmv1alpha1.OperatingSystemProfile{}
				if err := readObject(file, osp); err != nil {
					t.Fatal(err)
				}
				if osp.Spec.OSVersion != spec.osVersion[i] {
					t.Errorf("%s: osVersion %s, the guide says %s", file, osp.Spec.OSVersion, spec.osVersion[i])
				}
			}
		})
	}
}
