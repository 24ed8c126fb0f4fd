//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	osmv1alpha1 "github.com/osmhq/osm/crds/osm/v1alpha1"
	"github.com/osmhq/osm/host/testenv"
)

// siteSysctl is the sysctl the e2e's site extension sets, with a value no kernel or distribution defaults to, so
// that finding it in the kernel proves the node applied the extension's file.
const siteSysctl, siteSysctlValue = "vm/max_map_count", "262147"

// The files the site extension's bootcmd and runcmd write on the node.
const extensionBootcmdFile, extensionRuncmdFile = "/var/lib/osm-e2e/extension-bootcmd", "/var/lib/osm-e2e/extension-runcmd"

// applySiteExtension creates deploy/examples/extension-site.yaml for osp before the node's MachineDeployment,
// without its package installation (the e2e node has no package mirror) and with the distinctive sysctl value.
func applySiteExtension(t *testing.T, c *cluster, osp *osmv1alpha1.OperatingSystemProfile) *osmv1alpha1.OperatingSystemProfileExtension {
	t.Helper()
	x := &osmv1alpha1.OperatingSystemProfileExtension{}
	data := readRepoFile(t, filepath.Join("deploy", "examples", "extension-site.yaml"))
	if err := yaml.UnmarshalStrict(data, x); err != nil {
		t.Fatal(err)
	}
	x.Namespace = osp.Namespace
	x.Spec.Selector = osmv1alpha1.ProfileSelector{Names: []string{osp.Name}}
	cfg := x.Spec.ProvisioningConfig
	for i := range cfg.Files {
		if cfg.Files[i].Path == "/etc/sysctl.d/90-site.conf" {
			cfg.Files[i].Content.Inline.Data = "vm.max_map_count = " + siteSysctlValue + "\n"
		}
	}
	cfg.CloudInitModules.RunCMD = slices.DeleteFunc(cfg.CloudInitModules.RunCMD, func(s string) bool { return strings.Contains(s, "apt-get") })
	// Commands whose only trace is what they write: the node ran them, with a shell (the content is computed).
	cfg.CloudInitModules.BootCMD = append(cfg.CloudInitModules.BootCMD, "mkdir -p "+filepath.Dir(extensionBootcmdFile)+` && echo "bootcmd $((6*7))" >`+extensionBootcmdFile)
	cfg.CloudInitModules.RunCMD = append(cfg.CloudInitModules.RunCMD, "mkdir -p "+filepath.Dir(extensionRuncmdFile)+` && echo "runcmd $((6*7))" >`+extensionRuncmdFile)
	if err := c.c.Create(context.Background(), x); err != nil {
		t.Fatalf("creating the site extension: %v", err)
	}
	// The controller's cache has the extension once its status lists the profile: the MachineDeployment created
	// next renders with it from the start.
	got := &osmv1alpha1.OperatingSystemProfileExtension{}
	testenv.Eventually(t, 90*time.Second, "the site extension's status listing "+osp.Name, func() error {
		if err := c.c.Get(context.Background(), client.ObjectKeyFromObject(x), got); err != nil {
			return err
		}
		if !slices.Contains(got.Status.Profiles, osp.Name) {
			return fmt.Errorf("status lists %v", got.Status.Profiles)
		}
		return nil
	})
	return got
}

// siteSysctlState is the extension's sysctl before the node booted and while it runs.
type siteSysctlState struct {
	before, running string
	err             error
}

// readSiteSysctl reads the extension's sysctl while the node runs (its writes land in the host's kernel and are
// restored when the node is collected).
func readSiteSysctl(n *node) siteSysctlState {
	v, err := readSysctl("/proc/sys/" + siteSysctl)
	return siteSysctlState{before: strings.TrimSpace(n.sysctls["/proc/sys/"+siteSysctl]), running: strings.TrimSpace(v), err: err}
}

// checkSiteExtension: the extension's files are on the node, its bootcmd and runcmd ran (cloud-init's init stage
// runs bootcmd; runcmd, which that stage skips, runs from osm-setup's provisioning commands), its sysctl was in
// force, and its CA is in the node's trust store (update-ca-certificates ran before containerd started).
func checkSiteExtension(t *testing.T, n *node, x *osmv1alpha1.OperatingSystemProfileExtension, sysctl siteSysctlState) {
	for _, f := range x.Spec.ProvisioningConfig.Files {
		got := n.file(f.Path)
		if !got.exists || string(got.content) != f.Content.Inline.Data {
			t.Errorf("%s on the node: exists %v, content %q; want the extension's", f.Path, got.exists, got.content)
		}
	}
	if sysctl.err != nil || sysctl.running != siteSysctlValue || sysctl.before == "" || sysctl.before == siteSysctlValue {
		t.Errorf("sysctl %s: %q before the node, %q while it ran (%v); want the node to have set %s", siteSysctl, sysctl.before, sysctl.running, sysctl.err, siteSysctlValue)
	}
	for path, want := range map[string]string{extensionBootcmdFile: "bootcmd 42\n", extensionRuncmdFile: "runcmd 42\n"} {
		if got := n.file(path); !got.exists || string(got.content) != want {
			t.Errorf("%s on the node: exists %v, content %q; want %q, written by the extension's command", path, got.exists, got.content, want)
		}
	}
	caLine := "MIIBJDCB16ADAgECAgEBMAUGAytlcDAaMRgwFgYDVQQDEw9FeGFtcGxlIFNpdGUg"
	if bundle := n.file("/etc/ssl/certs/ca-certificates.crt"); !strings.Contains(string(bundle.content), caLine) {
		t.Errorf("the site CA is not in the node's trust store /etc/ssl/certs/ca-certificates.crt (%d bytes)", len(bundle.content))
	}
}

func readRepoFile(t *testing.T, rel string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), rel))
	if err != nil {
		t.Fatal(err)
	}
	return data
}
