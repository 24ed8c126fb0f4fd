//go:build e2e

package e2e

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	ignconfig "github.com/coreos/ignition/v2/config/v3_3"
	igntypes "github.com/coreos/ignition/v2/config/v3_3/types"

	"github.com/osmhq/osm/host/render"
)

// The host encodes Ignition spec 3.3 (host/encode/ignition); ParseCompatibleVersion also accepts older specs.

// testFlatcarIgnition applies the Ignition provisioning config OSM renders for a Flatcar MachineDeployment to
// a fresh Debian rootfs with the real Ignition (files stage, --platform=file), enables the units the way a
// Flatcar first boot does (systemd presets), boots it, and checks files and units.
//
// What this proves and what it cannot: Ignition's own code accepts the config and lays out exactly the files
// (paths, modes, contents), unit files, drop-ins, masks and enablement the OSC describes. The boot then runs
// Flatcar's osm-setup on Debian. Nothing of it is Debian-specific: Flatcar's containerd drop-in starts
// /usr/bin/containerd, which the Debian rootfs has (preinstalled, as on Flatcar), the binaries come from the
// mirror, so osm-setup, containerd and the kubelet must work and the kubelet must ask for its certificate with
// this MachineDeployment's bootstrap token. What is Flatcar-only is the bootstrap stage's handoff (write
// /oem/config.ign, flag /boot/flatcar/first_boot, reboot into Ignition), which needs a Flatcar image; it is
// not booted here. Units that exist only on Flatcar (update-engine, locksmithd) are masked or configured by
// name, which systemd accepts for units that do not exist.
func testFlatcarIgnition(t *testing.T, c *cluster) {
	osp := c.airgappedProfile(t, "osp-flatcar", "osp-flatcar-airgapped", nil)
	md := c.createMDFor(t, "e2e-flatcar", "flatcar", osp.Name, "kubevirt")
	boot, prov := c.userData(t, md)
	bootstrapUser := "system:bootstrap:" + c.bootstrapTokenID(t, md)
	for _, data := range [][]byte{boot.Data[render.CloudConfigKey], prov.Data[render.CloudConfigKey]} {
		if _, rpt, err := ignconfig.ParseCompatibleVersion(data); err != nil || rpt.IsFatal() {
			t.Fatalf("Ignition rejects the config: %v\n%s", err, rpt)
		}
	}
	cfg, _, _ := ignconfig.ParseCompatibleVersion(prov.Data[render.CloudConfigKey])
	nodeName := "e2e-flatcar-0"

	var ignitionLog []byte
	var presets []string
	prepare := func(t *testing.T, root string) {
		dir := filepath.Dir(root)
		cfgPath := filepath.Join(dir, "provisioning.ign")
		if err := os.WriteFile(cfgPath, prov.Data[render.CloudConfigKey], 0o600); err != nil {
			t.Fatal(err)
		}
		// The fetch stage reads the config (platform "file": $IGNITION_CONFIG_FILE) into the cache; the files
		// stage writes files, users, unit files, drop-ins, masks and presets. Cache and state go to the node's
		// directory, never to the host's /run.
		for _, stage := range []string{"fetch", "files"} {
			cmd := exec.Command(harness.Ignition, "-platform=file", "-stage="+stage, "-root="+root, "-log-to-stdout",
				"-config-cache="+filepath.Join(dir, "ignition-cache.json"), "-state-file="+filepath.Join(dir, "ignition-state"),
				"-neednet="+filepath.Join(dir, "ignition-neednet"), "-fetch-timeout=30s")
			cmd.Env = append(os.Environ(), "IGNITION_CONFIG_FILE="+cfgPath)
			out, err := cmd.CombinedOutput()
			ignitionLog = append(ignitionLog, out...)
			_ = os.WriteFile(filepath.Join(dir, "ignition.log"), ignitionLog, 0o644)
			if err != nil {
				t.Fatalf("ignition --stage=%s: %v\n%s", stage, err, tail(string(out), 30))
			}
		}
		// "enabled: true" only writes a preset; a Flatcar first boot applies presets, here systemctl does.
		presets = readPresets(t, filepath.Join(root, "etc/systemd/system-preset/20-ignition.preset"))
		if len(presets) > 0 {
			args := append([]string{"--root=" + root, "preset"}, presets...)
			if out, err := exec.Command("systemctl", args...).CombinedOutput(); err != nil {
				t.Fatalf("systemctl %v: %v\n%s", args, err, out)
			}
		}
		checkIgnitionResult(t, cfg, root)
	}
	n := bootNode(t, nodeOptions{Name: nodeName, Prepare: prepare, Lifetime: 10 * time.Minute,
		Units: []string{setupUnit, containerd, kubeletUnit, "osm-health-monitor.timer", "update-engine.service", "locksmithd.service"}})
	t.Logf("ignition: %d log lines (%s); presets applied: %v", strings.Count(string(ignitionLog), "\n"), filepath.Join(n.dir, "ignition.log"), presets)

	csr, err := c.waitForCSR(n, bootstrapUser, 6*time.Minute, setupUnit)
	r := n.collect()
	if err != nil {
		r.diagnose(t, setupUnit, containerd, kubeletUnit)
		t.Fatal(err)
	}
	t.Logf("CSR %s: username=%s groups=%v", csr.Name, csr.Spec.Username, csr.Spec.Groups)

	t.Run("files, units and enablement after the boot", func(t *testing.T) {
		checkIgnitionResult(t, cfg, n.root)
		for _, u := range cfg.Systemd.Units {
			if u.Enabled != nil && *u.Enabled {
				if st := r.units[u.Name]; st["UnitFileState"] != "enabled" && st != nil {
					t.Errorf("%s: Ignition enabled it, systemd says %s", u.Name, st["UnitFileState"])
				}
			}
		}
	})
	t.Run("osm-setup, containerd and the kubelet ran", func(t *testing.T) {
		if st := r.units[setupUnit]; st["Result"] != "success" || st.restarts() != 0 || !n.file(setupDone).exists {
			t.Errorf("%s: %s", setupUnit, st)
		}
		if st := r.units[containerd]; !st.active() {
			t.Errorf("%s: %s", containerd, st)
		}
		if j := r.unitJournal(kubeletUnit); !strings.Contains(j, "Started kubelet.service") {
			t.Errorf("kubelet.service was never started:\n%s", tail(j, 20))
		}
		env := environmentFailures()
		for _, u := range r.failed {
			if reason, ok := env[u]; ok {
				t.Logf("%s failed, as expected on this host: %s", u, reason)
			} else {
				t.Errorf("unit %s failed:\n%s", u, tail(r.unitJournal(u), 15))
			}
		}
	})
	t.Run("kubelet asked for its certificate with the bootstrap token", func(t *testing.T) {
		checkCSR(t, c, csr, bootstrapUser, nodeName)
	})
	t.Run("Flatcar-only units are masked or absent", func(t *testing.T) {
		for _, u := range cfg.Systemd.Units {
			if u.Mask != nil && *u.Mask {
				t.Logf("masked: %s (exists on Debian: %v)", u.Name, r.units[u.Name]["LoadState"] != "not-found")
			}
		}
	})
	if t.Failed() {
		r.diagnose(t, setupUnit, containerd, kubeletUnit)
	}
}

// checkIgnitionResult compares a root filesystem with an Ignition config: files (mode, content), unit files,
// drop-ins, masks, and enabled units (a symlink in a .wants directory once presets are applied).
func checkIgnitionResult(t testing.TB, cfg igntypes.Config, root string) {
	t.Helper()
	for _, f := range cfg.Storage.Files {
		p := filepath.Join(root, f.Path)
		info, err := os.Stat(p)
		if err != nil {
			t.Errorf("%s: %v", f.Path, err)
			continue
		}
		if f.Mode != nil && info.Mode().Perm() != os.FileMode(*f.Mode) {
			t.Errorf("%s: mode %04o, Ignition config %04o", f.Path, info.Mode().Perm(), *f.Mode)
		}
		want, err := ignitionContents(f.Contents)
		if err != nil {
			t.Errorf("%s: %v", f.Path, err)
			continue
		}
		if got, _ := os.ReadFile(p); !bytes.Equal(got, want) {
			t.Errorf("%s: content differs from the Ignition config\n--- node ---\n%s\n--- config ---\n%s", f.Path, firstLines(string(got), 8), firstLines(string(want), 8))
		}
	}
	units := filepath.Join(root, "etc/systemd/system")
	for _, u := range cfg.Systemd.Units {
		if u.Mask != nil && *u.Mask {
			if target, err := os.Readlink(filepath.Join(units, u.Name)); err != nil || target != "/dev/null" {
				t.Errorf("%s: not masked (%q, %v)", u.Name, target, err)
			}
			continue
		}
		if u.Contents != nil {
			if got, err := os.ReadFile(filepath.Join(units, u.Name)); err != nil || string(got) != *u.Contents {
				t.Errorf("%s: unit file differs from the Ignition config (%v)", u.Name, err)
			}
		}
		for _, d := range u.Dropins {
			if got, err := os.ReadFile(filepath.Join(units, u.Name+".d", d.Name)); err != nil || d.Contents == nil || string(got) != *d.Contents {
				t.Errorf("%s drop-in %s: differs from the Ignition config (%v)", u.Name, d.Name, err)
			}
		}
		if u.Enabled != nil && *u.Enabled {
			if links, _ := filepath.Glob(filepath.Join(units, "*.wants", u.Name)); len(links) == 0 {
				t.Errorf("%s: Ignition enables it; no .wants link after the presets", u.Name)
			}
		}
	}
	passwd, _ := os.ReadFile(filepath.Join(root, "etc/passwd"))
	for _, u := range cfg.Passwd.Users {
		// The user's home from /etc/passwd: /home/<name> for the users Ignition creates, /root for root.
		home := ""
		for _, line := range strings.Split(string(passwd), "\n") {
			if f := strings.Split(line, ":"); len(f) >= 7 && f[0] == u.Name {
				home = f[5]
			}
		}
		if home == "" {
			t.Errorf("user %s: not in /etc/passwd", u.Name)
			continue
		}
		// Ignition writes the keys to ~/.ssh/authorized_keys.d/ignition, which Flatcar's sshd reads (stock
		// OpenSSH reads only authorized_keys).
		ssh := filepath.Join(root, home, ".ssh")
		var keys []byte
		for _, f := range []string{"authorized_keys.d/ignition", "authorized_keys"} {
			data, _ := os.ReadFile(filepath.Join(ssh, f))
			keys = append(keys, data...)
		}
		for _, k := range u.SSHAuthorizedKeys {
			if !strings.Contains(string(keys), string(k)) {
				t.Errorf("user %s: key %q not in %s/authorized_keys{,.d/ignition}", u.Name, k, ssh)
			}
		}
	}
}

// ignitionContents decodes a file's data URL (RFC 2397) and its compression.
func ignitionContents(r igntypes.Resource) ([]byte, error) {
	if r.Source == nil {
		return nil, nil
	}
	src := *r.Source
	rest, ok := strings.CutPrefix(src, "data:")
	if !ok {
		return nil, fmt.Errorf("source %.30q is not a data URL; the harness fetches nothing", src)
	}
	meta, data, ok := strings.Cut(rest, ",")
	if !ok {
		return nil, fmt.Errorf("malformed data URL")
	}
	var raw []byte
	var err error
	if strings.HasSuffix(meta, ";base64") {
		raw, err = base64.StdEncoding.DecodeString(data)
	} else {
		var s string
		s, err = url.PathUnescape(data)
		raw = []byte(s)
	}
	if err != nil {
		return nil, err
	}
	if r.Compression != nil && *r.Compression == "gzip" {
		zr, err := gzip.NewReader(bytes.NewReader(raw))
		if err != nil {
			return nil, err
		}
		return io.ReadAll(zr)
	}
	return raw, nil
}

// readPresets returns the units an Ignition preset file enables.
func readPresets(t *testing.T, path string) []string {
	f, err := os.Open(path)
	if err != nil {
		t.Logf("no preset file from Ignition (%v)", err)
		return nil
	}
	defer f.Close()
	var out []string
	s := bufio.NewScanner(f)
	for s.Scan() {
		if fields := strings.Fields(s.Text()); len(fields) == 2 && fields[0] == "enable" && !slices.Contains(out, fields[1]) {
			out = append(out, fields[1])
		}
	}
	return out
}
