//go:build e2e

package e2e

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A node is a Debian rootfs booted with systemd-nspawn on the host's network, the closest thing to a VM these
// machines run (see /work/shared/NODE-E2E.md for what was tried): systemd is PID 1, cloud-init runs from a
// NoCloud seed, units are real units. It shares the host's kernel, which the harness accounts for:
//
//   - The node gets a cgroup v2 view (SYSTEMD_NSPAWN_UNIFIED_HIERARCHY=1) in a cgroup of its own, because the
//     kubelet refuses cgroup v1 by default since 1.35 (failCgroupV1) and this host is hybrid v1/v2.
//   - /proc/sys is writable (SYSTEMD_NSPAWN_API_VFS_WRITABLE=1): osm-setup runs `sysctl --system`, which a VM
//     can always do. The node's writes land in the host's kernel, so every writable sysctl is saved before the
//     boot and the changed ones are restored after it (restoreSysctls).
//   - The node keeps CAP_NET_ADMIN, which nspawn drops unless the container has a network of its own: a VM's
//     root has it, and osm-setup sets net.* sysctls. Packet filter tables the node adds to the shared network
//     namespace (the kubelet's canary chains, through iptables-nft) are removed after the boot.
//   - /dev/kmsg is the host's (read-only, with CAP_SYSLOG to read it): the kubelet's OOM watcher refuses to
//     start without it, and nspawn provides none.
//   - /lib/modules/<host kernel>/modules.builtin lists the built-in kernel modules the node loads, as a kernel
//     package would: the rootfs has no kernel and the host kernel has modules built in, so modprobe needs to
//     find them there.
//   - A cloud.cfg.d drop-in keeps cloud-init from touching the host (no network config, no resizing of the
//     disk the rootfs lives on).
//
// Instrumentation: a report unit (osm-e2e-report.service) publishes the states of the units under test to
// /var/lib/osm-e2e/status every second, which the harness reads from the rootfs directory. When the harness
// has seen what it waits for (or gives up) it creates /var/lib/osm-e2e/collect; the unit then saves the unit
// list, failed units, `cloud-init status --long`, /run/cloud-init/result.json, /run/osm and the journal to
// /var/lib/osm-e2e/report and powers the node off. Everything is bounded: the unit gives up waiting on its own,
// and `timeout` kills nspawn.

// nodeOptions describe one boot.
type nodeOptions struct {
	// Name is the machine name: nspawn's machine name, the hostname and what <MACHINE_NAME> became.
	Name string
	// UserData is the cloud-init user-data of the NoCloud seed; empty for a node provisioned otherwise
	// (Ignition), which gets cloud-init disabled.
	UserData []byte
	// Ignition is the platform's Ignition config (the bootstrap user-data of an Ignition OS). With it the
	// harness plays the image's initramfs before every boot (see initramfsScript): Ignition applies this
	// config at the first boot, and the config the node stored at a boot it flagged as a first boot; /boot is
	// a file system of the node's own, kept across its reboots.
	Ignition []byte
	// Rootfs is the root file system to boot: a directory or a tarball (.tar, .tar.gz, .tgz, .tar.zst);
	// the harness's Debian image when empty.
	Rootfs string
	// Prepare changes the unpacked rootfs before the boot (Ignition's files stage).
	Prepare func(t *testing.T, root string)
	// Units are the units whose states the report unit publishes.
	Units []string
	// Lifetime bounds the boot; the report unit collects and powers off a little before.
	Lifetime time.Duration
}

type node struct {
	t       *testing.T
	name    string
	dir     string // the node's temporary directory: rootfs, console log, cgroup names
	root    string
	console string
	cgroups []string
	cmd     *exec.Cmd
	exited  chan struct{}
	waitErr error
	sysctls map[string]string
	nftWas  map[string]bool
	report  *report
	// label is the node's block device labelled for an Ignition image that reads its user config from one
	// (see ignitionShapes); nil without one.
	label *labelDevice
	// bootDirs are the directories of the image's /boot, recreated in the node's /boot file system.
	bootDirs []string
}

const (
	e2eDir        = "/var/lib/osm-e2e"
	reportUnit    = "osm-e2e-report.service"
	cloudCfgDrop  = "/etc/cloud/cloud.cfg.d/05-osm-e2e-node.cfg"
	collectMargin = 45 * time.Second
)

// bootNode unpacks the rootfs, prepares it and starts the node. The node is stopped and removed when the test
// ends; its report stays readable until then.
func bootNode(t *testing.T, opts nodeOptions) *node {
	t.Helper()
	if opts.Lifetime == 0 {
		opts.Lifetime = 8 * time.Minute
	}
	dir, err := os.MkdirTemp(harness.Artifacts, opts.Name+"-")
	if err != nil {
		t.Fatal(err)
	}
	// Traversable by the node's users: Ignition writes a user's SSH keys as that user.
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	n := &node{t: t, name: opts.Name, dir: dir, root: filepath.Join(dir, "rootfs"), console: filepath.Join(dir, "console.log"), exited: make(chan struct{})}
	t.Cleanup(n.cleanup)
	n.unpack(opts.Rootfs)
	if len(opts.Ignition) > 0 {
		n.imageShape()
	}
	n.prepare(opts)
	if opts.Prepare != nil {
		opts.Prepare(t, n.root)
	}
	n.sysctls = snapshotSysctls()
	if data, err := json.Marshal(n.sysctls); err == nil {
		_ = os.WriteFile(sysctlSnapshotPath(), data, 0o600)
	}
	n.nftWas = n.nftTables()
	n.start(opts.Lifetime, len(opts.Ignition) > 0)
	t.Logf("node %s: booting (rootfs %s, console %s)", n.name, n.root, n.console)
	return n
}

// unpack copies the image (a directory or a tarball; the harness's Debian image when empty) to the node's
// root file system.
func (n *node) unpack(image string) {
	n.t.Helper()
	if image == "" {
		image = harness.Rootfs
	}
	if err := os.MkdirAll(n.root, 0o755); err != nil {
		n.t.Fatal(err)
	}
	var cmd *exec.Cmd
	if info, err := os.Stat(image); err != nil {
		n.t.Fatalf("root file system: %v", err)
	} else if info.IsDir() {
		cmd = exec.Command("cp", "-a", image+"/.", n.root)
	} else {
		args := []string{"-xpf", image, "-C", n.root}
		switch {
		case strings.HasSuffix(image, ".zst") || strings.HasSuffix(image, ".tzst"):
			args = append([]string{"--zstd"}, args...)
		case strings.HasSuffix(image, ".gz") || strings.HasSuffix(image, ".tgz"):
			args = append([]string{"--gzip"}, args...)
		case strings.HasSuffix(image, ".xz"):
			args = append([]string{"--xz"}, args...)
		}
		cmd = exec.Command("tar", args...)
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		n.t.Fatalf("unpacking %s: %v\n%s", image, err, out)
	}
	if _, err := os.Stat(filepath.Join(n.root, "lib/systemd/systemd")); err != nil {
		if _, err := os.Stat(filepath.Join(n.root, "usr/lib/systemd/systemd")); err != nil {
			n.t.Fatalf("%s has no /usr/lib/systemd/systemd: the harness boots images whose init is systemd", image)
		}
	}
}

func (n *node) prepare(opts nodeOptions) {
	t := n.t
	t.Helper()
	// An empty machine-id makes systemd generate one at boot without treating the boot as "uninitialized"
	// (which would preset-all and enable systemd-networkd and resolved against the host's network).
	n.write("/etc/machine-id", "", 0o444)
	_ = os.Remove(filepath.Join(n.root, "var/lib/dbus/machine-id"))
	n.write("/etc/hostname", opts.Name+"\n", 0o644)

	if len(opts.UserData) > 0 {
		n.write("/var/lib/cloud/seed/nocloud/user-data", string(opts.UserData), 0o600)
		n.write("/var/lib/cloud/seed/nocloud/meta-data", fmt.Sprintf("instance-id: %s\nlocal-hostname: %s\n", opts.Name, opts.Name), 0o600)
		n.write(cloudCfgDrop, `# OSM node e2e harness: the node shares the host's kernel, disk and network.
datasource_list: [NoCloud, None]
network: {config: disabled}
preserve_hostname: true
manage_etc_hosts: false
resize_rootfs: false
growpart: {mode: 'off'}
locale: C.UTF-8
`, 0o644)
	} else {
		n.write("/etc/cloud/cloud-init.disabled", "", 0o644)
	}
	if len(opts.Ignition) > 0 {
		if err := os.WriteFile(filepath.Join(n.dir, "user-data.ign"), opts.Ignition, 0o600); err != nil {
			t.Fatal(err)
		}
		labelDev := ""
		if n.label != nil {
			labelDev = n.label.dev
		}
		if err := os.WriteFile(filepath.Join(n.dir, "initramfs"), []byte(initramfsScript(n.root, n.dir, labelDev)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Join(n.root, "boot"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	n.kernelModules()

	units := append([]string{}, opts.Units...)
	n.write(e2eDir+"/units", strings.Join(units, " ")+"\n", 0o644)
	// An absolute deadline (the node shares the host's clock), which holds across the node's reboots.
	deadline := time.Now().Add(opts.Lifetime - collectMargin)
	n.write("/usr/local/sbin/osm-e2e-report", reportScript(deadline.Unix()), 0o755)
	n.write("/etc/systemd/system/"+reportUnit, `[Unit]
Description=OSM node e2e harness: publish unit states, collect the report when told, power off
After=multi-user.target

[Service]
Type=exec
ExecStart=/usr/local/sbin/osm-e2e-report

[Install]
WantedBy=multi-user.target
`, 0o644)
	link := filepath.Join(n.root, "etc/systemd/system/multi-user.target.wants", reportUnit)
	if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc/systemd/system/"+reportUnit, link); err != nil {
		t.Fatal(err)
	}
}

// reportScript waits for the harness (or its own deadline, in seconds since the epoch), collects, and powers
// the node off. The journals it saves span all of the node's boots.
func reportScript(deadline int64) string {
	return `#!/bin/sh
# osm-e2e-report: installed by OSM's node e2e harness (host/e2e), not part of what OSM provisions.
d=` + e2eDir + `
units=$(cat $d/units)
deadline=` + strconv.FormatInt(deadline, 10) + `
systemctl is-system-running --wait >/dev/null 2>&1
while [ ! -e $d/collect ] && [ "$(date +%s)" -lt $deadline ]; do
  { date +%s; systemctl show -p Id,LoadState,ActiveState,SubState,Result,NRestarts,ExecMainStatus,UnitFileState $units; } >$d/status.tmp 2>&1
  mv $d/status.tmp $d/status
  sleep 1
done
r=$d/report
rm -rf $r
mkdir -p $r
[ -e $d/collect ] || echo "the harness never asked for the report; collected at the node's own deadline" >$r/deadline
systemctl show -p Id,LoadState,ActiveState,SubState,Result,NRestarts,ExecMainStatus,UnitFileState $units >$r/units.show 2>&1
systemctl list-units --all --no-pager --plain --no-legend >$r/units.txt 2>&1
systemctl list-unit-files --no-pager --plain --no-legend >$r/unit-files.txt 2>&1
systemctl list-units --failed --no-pager --plain --no-legend >$r/failed.txt 2>&1
systemctl is-system-running >$r/system-state.txt 2>&1
cloud-init status --long >$r/cloud-init-status.txt 2>&1; echo "exit status $?" >>$r/cloud-init-status.txt
timeout 10 cloud-init status --wait >$r/cloud-init-status-wait.txt 2>&1; echo "exit status $? (124: still waiting after 10s)" >>$r/cloud-init-status-wait.txt
cp /run/cloud-init/result.json /run/cloud-init/status.json $r/ 2>/dev/null
[ -d /run/osm ] && cp -a /run/osm $r/run-osm
journalctl --no-pager -o short-precise >$r/journal.txt 2>&1
for u in $units; do journalctl --no-pager -o short-precise -u "$u" >"$r/journal-$u.txt" 2>&1; done
sync
touch $r/complete
systemctl poweroff
`
}

// kernelModules writes /lib/modules/<release>/modules.builtin for the modules the node loads that the host
// kernel has built in, and lets the node's depmod index it.
func (n *node) kernelModules() {
	t := n.t
	release := unameRelease(t)
	config := kernelConfig(t)
	want := []struct{ symbol, path string }{
		{"CONFIG_OVERLAY_FS", "kernel/fs/overlayfs/overlay.ko"},
		{"CONFIG_BRIDGE", "kernel/net/bridge/bridge.ko"},
		{"CONFIG_BRIDGE_NETFILTER", "kernel/net/bridge/br_netfilter.ko"},
		{"CONFIG_NF_CONNTRACK", "kernel/net/netfilter/nf_conntrack.ko"},
		{"CONFIG_IP_VS", "kernel/net/netfilter/ipvs/ip_vs.ko"},
		{"CONFIG_IP_VS_RR", "kernel/net/netfilter/ipvs/ip_vs_rr.ko"},
		{"CONFIG_IP_VS_WRR", "kernel/net/netfilter/ipvs/ip_vs_wrr.ko"},
		{"CONFIG_IP_VS_SH", "kernel/net/netfilter/ipvs/ip_vs_sh.ko"},
		{"CONFIG_VXLAN", "kernel/drivers/net/vxlan/vxlan.ko"},
	}
	var b strings.Builder
	for _, w := range want {
		if config[w.symbol] == "y" {
			b.WriteString(w.path + "\n")
		}
	}
	n.write("/lib/modules/"+release+"/modules.builtin", b.String(), 0o644)
	if !slices.ContainsFunc([]string{"sbin/depmod", "usr/sbin/depmod", "bin/depmod", "usr/bin/depmod"}, func(p string) bool {
		_, err := os.Lstat(filepath.Join(n.root, p))
		return err == nil
	}) {
		// A vendor's image without kmod: its modprobe (if any) finds no index, as on a machine without one.
		t.Logf("the node's image has no depmod: built-in kernel modules are not indexed")
		return
	}
	if out, err := exec.Command("chroot", n.root, "depmod", release).CombinedOutput(); err != nil {
		t.Fatalf("depmod in the node rootfs: %v\n%s", err, out)
	}
}

func unameRelease(t *testing.T) string {
	var u syscall.Utsname
	if err := syscall.Uname(&u); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, c := range u.Release {
		if c == 0 {
			break
		}
		b.WriteByte(byte(c))
	}
	return b.String()
}

// kernelConfig reads the running kernel's configuration (/proc/config.gz); empty when the kernel does not
// publish it.
func kernelConfig(t *testing.T) map[string]string {
	out := map[string]string{}
	f, err := os.Open("/proc/config.gz")
	if err != nil {
		t.Logf("no /proc/config.gz (%v): the node finds no built-in kernel modules", err)
		return out
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	s := bufio.NewScanner(zr)
	for s.Scan() {
		if k, v, ok := strings.Cut(s.Text(), "="); ok && !strings.HasPrefix(k, "#") {
			out[k] = v
		}
	}
	return out
}

func (n *node) write(path, content string, mode os.FileMode) {
	n.t.Helper()
	p := filepath.Join(n.root, path)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		n.t.Fatal(err)
	}
	_ = os.Remove(p)
	if err := os.WriteFile(p, []byte(content), mode); err != nil {
		n.t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil {
		n.t.Fatal(err)
	}
}

// start runs nspawn in a private mount namespace (with a tmpfs on /run/systemd, because the host's /run is on
// disk and not managed by systemd) inside cgroups of the node's own. A reboot of the node (nspawn's exit status
// 133) boots it again, within the same lifetime; with initramfs, the node's directory holds an initramfs script
// that runs before every boot, and /boot is a tmpfs of the node's own that its reboots keep (with the
// directories of the image's /boot); a node with a labelled file system (labelDevice) finds it at
// /dev/disk/by-label/<label>.
func (n *node) start(lifetime time.Duration, initramfs bool) {
	t := n.t
	n.cgroups = nodeCgroups(t, filepath.Base(n.dir))
	var join strings.Builder
	for _, cg := range n.cgroups {
		fmt.Fprintf(&join, "echo $$ >%s/cgroup.procs\n", cg)
	}
	if initramfs {
		fmt.Fprintf(&join, "mount -t tmpfs -o mode=0755,size=64m boot %s/boot\n", n.root)
		for _, d := range n.bootDirs {
			fmt.Fprintf(&join, "mkdir -p %s\n", filepath.Join(n.root, "boot", d))
		}
	}
	// The node's /boot goes with its mount namespace: what it holds whenever the node stops is listed in
	// <dir>/boot-at-stop.txt for the checks.
	afterStop := ""
	if initramfs {
		afterStop = fmt.Sprintf("  find %s/boot -mindepth 1 -printf '%%y %%P\\n' 2>/dev/null | sort >%s/boot-at-stop.txt || true\n", n.root, n.dir)
	}
	nspawnExtra := ""
	if n.label != nil {
		nspawnExtra = " --bind=" + n.label.dev + ":/dev/disk/by-label/" + n.label.name
	}
	script := join.String() + fmt.Sprintf(`mkdir -p /run/systemd
mount -t tmpfs tmpfs /run/systemd
end=$(( $(date +%%s) + %d ))
boot=0
while :; do
  boot=$((boot + 1))
  echo $boot >%[2]s/boots
  if [ -x %[2]s/initramfs ]; then %[2]s/initramfs $boot || { echo "osm-e2e: the initramfs failed before boot $boot" >&2; exit 97; }; fi
  left=$(( end - $(date +%%s) ))
  [ $left -gt 0 ] || exit 124
  rc=0
  timeout --kill-after=15 $left systemd-nspawn --quiet --boot --directory=%[3]s --machine=%[4]s --register=no --keep-unit --console=pipe --capability=CAP_NET_ADMIN,CAP_SYSLOG --bind-ro=/dev/kmsg%[5]s || rc=$?
%[6]s  [ $rc = 133 ] || exit $rc
  echo "osm-e2e: the node rebooted after boot $boot" >&2
done
`, int(lifetime.Seconds()), n.dir, n.root, n.name, nspawnExtra, afterStop)
	cmd := exec.Command("unshare", "--mount", "--propagation", "private", "sh", "-euc", script)
	cmd.Env = append(os.Environ(), "SYSTEMD_NSPAWN_UNIFIED_HIERARCHY=1", "SYSTEMD_NSPAWN_API_VFS_WRITABLE=1")
	console, err := os.Create(n.console)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = console, console
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting systemd-nspawn: %v", err)
	}
	n.cmd = cmd
	go func() {
		n.waitErr = cmd.Wait()
		console.Close()
		close(n.exited)
	}()
}

// initramfsScript plays the initramfs of an image provisioned by Ignition, which runs before the root file
// system boots. It takes the boot's number and decides, from the shapes of ignitionShapes, whether the boot is
// a first boot: the first boot always is, and so is a boot whose image shape's trigger is set (a flag file that
// exists, or one that is missing where its directory exists). It then runs the real Ignition's fetch and files
// stages on the root file system with --platform=file and, once they succeeded, clears the trigger as the image
// would (removes the flag it found, creates the flag it missed). The config is the one the node stored where
// the shape's initramfs reads one (a path of the root file system, or a path on the file system labelled
// Label, read from labelDev with debugfs), else the platform's user-data (<dir>/user-data.ign), which is what
// Ignition would read.
//
// The labelled file system is read with debugfs, in user space, rather than mounted on the host: the node
// wrote it, and the host's kernel parses no file system a node controls.
//
// systemd applies the presets Ignition writes (Ignition does not enable units) only at a boot without an
// initialised /etc/machine-id. The script stands in for that: at such a boot (the first, or one after the
// node removed its machine ID) it applies the presets of the units in Ignition's preset file with
// `systemctl --root`, and writes a new machine ID. The image's other presets are not applied, so that units
// such as systemd-networkd stay off the host's network, which the node shares. At any other boot nothing
// applies them: the units of a second Ignition run stay disabled unless the plugin's handoff answers for
// them (sdk/SPEC.md §9.3).
func initramfsScript(root, dir, labelDev string) string {
	var shapes strings.Builder
	for _, s := range ignitionShapes {
		label := s.Label
		if label == "" {
			label = "-"
		}
		kind := "touch"
		if s.Remove {
			kind = "remove"
		}
		fmt.Fprintf(&shapes, "%s %s %s %s %s\n", s.Name, kind, s.Flag, label, strings.Join(s.Stored, " "))
	}
	return `#!/bin/sh
# The initramfs of an Ignition image, played by OSM's node e2e harness (host/e2e/node_test.go).
set -eu
root=` + root + `
dir=` + dir + `
labeldev=` + labelDev + `
boot=$1
log() { echo "initramfs (boot $boot): $*" >>$dir/initramfs.log; }
# One image shape a line (ignitionShapes): name; trigger (touch: Ignition runs while the flag exists; remove:
# while it is missing where its directory exists); flag; label of the file system the stored config is on
# (- for the root file system); where the stored config is.
shapes='` + shapes.String() + `'
shape= kind= flag= label= stored=
while read -r n k f l s; do
  [ -n "$n" ] || continue
  case $k in
  touch) [ -e $root$f ] || continue ;;
  remove) { [ -d $root$(dirname $f) ] && [ ! -e $root$f ]; } || continue ;;
  esac
  shape=$n kind=$k flag=$f label=$l stored=$s
done <<OSM_SHAPES
$shapes
OSM_SHAPES
if [ "$boot" != 1 ] && [ -z "$shape" ]; then
  log "no first-boot trigger: Ignition does not run"
else
  cfg= src=
  if [ -z "$shape" ]; then
    # The first boot of an image of no shape a trigger recognises: a config stored on its root file system.
    stored=$(printf '%s' "$shapes" | awk '$4 == "-" { for (i = 5; i <= NF; i++) print $i }')
    label=-
  fi
  for c in $stored; do
    [ -z "$cfg" ] || break
    if [ "$label" = - ]; then
      if [ -f $root$c ]; then cfg=$root$c src=$c; fi
    elif [ -n "$labeldev" ]; then
      out=$dir/ignition-label-boot-$boot.ign
      rm -f $out
      (umask 077; debugfs -R "dump /$c $out" $labeldev >>$dir/initramfs.log 2>&1) || true
      if [ -s $out ]; then cfg=$out src=LABEL=$label:/$c; fi
    else
      log "no file system labelled $label: a config stored there cannot be read"
    fi
  done
  if [ -n "$cfg" ]; then
    log "Ignition applies the stored $src (image shape ${shape:-none}; first boot: ${kind:-boot 1} ${flag:-})"
  else
    cfg=$dir/user-data.ign
    log "Ignition applies the platform's user-data $cfg (image shape ${shape:-none}; first boot: ${kind:-boot 1} ${flag:-})"
  fi
  state=$dir/ignition-boot-$boot
  mkdir -p $state
  for stage in fetch files; do
    if ! IGNITION_CONFIG_FILE=$cfg ` + harness.Ignition + ` -platform=file -stage=$stage -root=$root -log-to-stdout       -config-cache=$state/cache.json -state-file=$state/state -neednet=$state/neednet -fetch-timeout=30s >>$state/ignition.log 2>&1; then
      log "Ignition's $stage stage failed; see $state/ignition.log"
      exit 1
    fi
  done
  log "Ignition's fetch and files stages succeeded ($state/ignition.log)"
  # The copy of a stored config holds credentials: it stays no longer than Ignition needs it.
  case $cfg in $dir/ignition-label-*) rm -f $cfg ;; esac
  case $kind in
  touch) rm -f $root$flag; log "removed the first-boot flag $flag" ;;
  remove) touch $root$flag; log "created $flag: later boots are not first boots" ;;
  esac
fi
id=$(cat $root/etc/machine-id 2>/dev/null || true)
if [ "$boot" = 1 ] || [ -z "$id" ] || [ "$id" = uninitialized ]; then
  p=$root/etc/systemd/system-preset/20-ignition.preset
  units=
  if [ -f $p ]; then units=$(awk '$1 == "enable" || $1 == "disable" { print $2 }' $p | sort -u); fi
  if [ -n "$units" ]; then
    systemctl --root=$root preset $units >>$dir/initramfs.log 2>&1
    log "a first boot: systemd applies the presets of" $units
  else
    log "a first boot: no Ignition presets"
  fi
  tr -d '-' </proc/sys/kernel/random/uuid >$root/etc/machine-id
fi
`
}

// ignitionShape is how an Ignition image's boot loader and initramfs make a first boot and where they read a
// config the node stored for it, as the harness plays them (initramfsScript). It is the image's side of the
// handoff, written from the images' documentation and independent of the SDK's description of the same
// shapes (node.IgnitionBoot), so that a conformance run checks a plugin against the image, not against
// itself.
type ignitionShape struct {
	Name string
	// Flag is the first-boot flag: Ignition runs while it exists and the image removes it after (Remove
	// false), or while it is missing and the image creates it after (Remove true). An image of a Remove shape
	// is recognised by the flag's directory in its /boot.
	Flag   string
	Remove bool
	// Label is the label of the file system the image's initramfs reads Stored from; empty: the root file
	// system. The harness gives a node of a recognised shape with a label such a file system (labelDevice).
	Label string
	// Stored are where the initramfs reads a config the node stored; the first one found wins.
	Stored []string
}

// ignitionShapes are the Ignition images the harness plays; on a boot where several triggers are set, the last
// one listed wins.
var ignitionShapes = []ignitionShape{
	// Fedora CoreOS: GRUB runs Ignition while /boot/ignition.firstboot exists; the initramfs copies
	// /boot/ignition/config.ign to Ignition's user config, which Ignition prefers to the platform's.
	{Name: "fedora-coreos", Flag: "/boot/ignition.firstboot", Stored: []string{"/boot/ignition/config.ign"}},
	// Flatcar: /boot/flatcar/first_boot; the OEM config (/oem since 2023, /usr/share/oem before).
	{Name: "flatcar", Flag: "/boot/flatcar/first_boot", Stored: []string{"/oem/config.ign", "/usr/share/oem/config.ign"}},
	// openSUSE MicroOS and SLE Micro: GRUB runs Ignition while /boot/writable/firstboot_happened is missing
	// (the image creates it after a first boot); ignition-setup-user takes ignition/config.ign from the file
	// system labelled "ignition" in preference to the platform's user-data.
	{Name: "microos", Flag: "/boot/writable/firstboot_happened", Remove: true, Label: "ignition", Stored: []string{"ignition/config.ign"}},
}

// imageShape records the directories of the image's /boot, which the node's own /boot file system starts
// with (the image's /boot is hidden under it), and gives the node a labelled file system when the image is of
// a shape that reads one.
func (n *node) imageShape() {
	t := n.t
	boot := filepath.Join(n.root, "boot")
	_ = filepath.WalkDir(boot, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() && p != boot {
			rel, _ := filepath.Rel(boot, p)
			n.bootDirs = append(n.bootDirs, rel)
		}
		return nil
	})
	for _, s := range ignitionShapes {
		if !s.Remove || s.Label == "" {
			continue
		}
		if info, err := os.Stat(filepath.Join(n.root, filepath.Dir(s.Flag))); err == nil && info.IsDir() {
			n.label = newLabelDevice(t, n.dir, s.Label)
			t.Logf("node %s: a %s-shaped image (%s): the file system labelled %q is %s", n.name, s.Name, filepath.Dir(s.Flag), s.Label, n.label.dev)
			return
		}
	}
}

// boots is how often the node has booted.
func (n *node) boots() int {
	data, _ := os.ReadFile(filepath.Join(n.dir, "boots"))
	b, _ := strconv.Atoi(strings.TrimSpace(string(data)))
	return b
}

// nodeCgroups creates the node's cgroups: one in the cgroup v2 hierarchy, where the node's systemd runs, and
// one in the named systemd v1 hierarchy of a hybrid host, so that nothing lands in the hierarchies' roots.
func nodeCgroups(t *testing.T, name string) []string {
	var out []string
	for _, r := range cgroupRoots() {
		cg := filepath.Join(r, "osm-e2e-"+name)
		if err := os.Mkdir(cg, 0o755); err != nil {
			t.Fatalf("creating the node's cgroup: %v", err)
		}
		out = append(out, cg)
	}
	return out
}

// cgroupRoots are the hierarchies nodes get cgroups in.
func cgroupRoots() []string {
	if isCgroup2("/sys/fs/cgroup") {
		return []string{"/sys/fs/cgroup"}
	}
	var roots []string
	for _, r := range []string{"/sys/fs/cgroup/unified", "/sys/fs/cgroup/systemd"} {
		if _, err := os.Stat(r + "/cgroup.procs"); err == nil {
			roots = append(roots, r)
		}
	}
	return roots
}

// cgroupBusy reports whether a process is left in the cgroup tree.
func cgroupBusy(root string) bool {
	busy := false
	_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && d.Name() == "cgroup.procs" {
			if data, _ := os.ReadFile(p); len(bytes.TrimSpace(data)) > 0 {
				busy = true
			}
		}
		return nil
	})
	return busy
}

func isCgroup2(path string) bool {
	var st syscall.Statfs_t
	return syscall.Statfs(path, &st) == nil && st.Type == 0x63677270
}

// status returns the units' states as the report unit last published them.
func (n *node) status() map[string]unitState {
	data, err := os.ReadFile(filepath.Join(n.root, e2eDir, "status"))
	if err != nil {
		return nil
	}
	return parseShow(string(data))
}

// running reports whether nspawn still runs.
func (n *node) running() bool {
	select {
	case <-n.exited:
		return false
	default:
		return true
	}
}

// waitUntil polls cond (with the node's published unit states) until it returns true or an error, the node
// stops, or the timeout passes.
func (n *node) waitUntil(what string, timeout time.Duration, cond func(map[string]unitState) (bool, error)) error {
	deadline := time.Now().Add(timeout)
	for {
		ok, err := cond(n.status())
		switch {
		case err != nil:
			return fmt.Errorf("%s: %w", what, err)
		case ok:
			return nil
		case !n.running() && n.waitErr != nil:
			return fmt.Errorf("%s: the node stopped first: %w", what, n.waitErr)
		case !n.running():
			return fmt.Errorf("%s: the node powered off first", what)
		case time.Now().After(deadline):
			return fmt.Errorf("%s: not after %s", what, timeout)
		}
		time.Sleep(time.Second) // polling interval
	}
}

// collect asks the node for its report, waits for it to power off and reads the report.
func (n *node) collect() *report {
	t := n.t
	t.Helper()
	if n.report != nil {
		return n.report
	}
	if n.running() {
		n.write(e2eDir+"/collect", "", 0o644)
		select {
		case <-n.exited:
		case <-time.After(2 * time.Minute):
			t.Errorf("node %s did not power off within 2m of being asked for its report; killing it", n.name)
			n.kill()
		}
	}
	n.restoreSysctls()
	// Keep the report outside the rootfs, which is removed when the test passes.
	if out, err := exec.Command("cp", "-a", filepath.Join(n.root, e2eDir, "report"), filepath.Join(n.dir, "report")).CombinedOutput(); err != nil {
		t.Logf("node %s: copying its report: %v %s", n.name, err, out)
	}
	n.report = readReport(t, n)
	t.Logf("node %s: stopped (%v); report in %s", n.name, n.waitErr, n.report.dir)
	return n.report
}

func (n *node) kill() {
	if n.cmd != nil && n.cmd.Process != nil {
		_ = syscall.Kill(-n.cmd.Process.Pid, syscall.SIGKILL)
	}
	// timeout runs nspawn in a process group of its own: the node's cgroups hold them all.
	for _, cg := range n.cgroups {
		_ = os.WriteFile(filepath.Join(cg, "cgroup.kill"), []byte("1"), 0)
	}
	select {
	case <-n.exited:
	case <-time.After(30 * time.Second):
		n.t.Errorf("node %s: systemd-nspawn (pid %d) survived SIGKILL for 30s", n.name, n.cmd.Process.Pid)
	}
}

// cleanup stops the node if it still runs, restores sysctls, removes its cgroups and, unless kept, its files.
func (n *node) cleanup() {
	if n.cmd != nil && n.running() {
		n.write(e2eDir+"/collect", "", 0o644)
		select {
		case <-n.exited:
		case <-time.After(90 * time.Second):
			n.kill()
		}
	}
	n.restoreSysctls()
	for _, cg := range n.cgroups {
		removeCgroup(n.t, cg)
	}
	if n.label != nil {
		if err := n.label.detach(); err != nil {
			n.t.Errorf("node %s: the file system labelled %s: %v", n.name, n.label.name, err)
		}
	}
	// The report, console log and journals stay in the artifacts; the rootfs (hundreds of MB) only when the
	// test failed or OSM_E2E_KEEP is set.
	if !n.t.Failed() && os.Getenv("OSM_E2E_KEEP") == "" {
		if err := os.RemoveAll(n.root); err != nil {
			n.t.Errorf("removing the node rootfs: %v", err)
		}
	}
}

// removeCgroup removes a node's cgroup tree. The node has powered off, so the tree should be empty; whatever
// is left in it (a process that escaped nspawn's shutdown) is killed first.
func removeCgroup(t *testing.T, root string) {
	if cgroupBusy(root) {
		t.Logf("processes left in %s after the node stopped; killing them", root)
		_ = os.WriteFile(filepath.Join(root, "cgroup.kill"), []byte("1"), 0)
		for i := 0; i < 50 && cgroupBusy(root); i++ {
			time.Sleep(100 * time.Millisecond) // polling interval
		}
	}
	if err := removeCgroupTree(root); err != nil {
		t.Errorf("removing cgroup %s: %v", root, err)
	}
}

// removeCgroupTree removes a cgroup and its children, children first.
func removeCgroupTree(root string) error {
	var dirs []string
	_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			dirs = append(dirs, p)
		}
		return nil
	})
	for i := len(dirs) - 1; i >= 0; i-- {
		if err := os.Remove(dirs[i]); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	return nil
}

// sysctlSnapshotPath keeps the snapshot of a running node on disk, so that a run killed before its cleanup
// is undone by the next one (recoverStaleRun).
func sysctlSnapshotPath() string { return filepath.Join(harness.Cache, "sysctl-snapshot.json") }

// restoreSysctlSnapshot restores the host sysctls of a snapshot left on disk, and removes it.
func restoreSysctlSnapshot() []string {
	data, err := os.ReadFile(sysctlSnapshotPath())
	if err != nil {
		return nil
	}
	var snap map[string]string
	if json.Unmarshal(data, &snap) != nil {
		return nil
	}
	var restored []string
	for p, before := range snap {
		if now, err := readSysctl(p); err == nil && now != before && os.WriteFile(p, []byte(before), 0) == nil {
			restored = append(restored, p)
		}
	}
	_ = os.Remove(sysctlSnapshotPath())
	return restored
}

// snapshotSysctls reads every writable sysctl of the host.
func snapshotSysctls() map[string]string {
	out := map[string]string{}
	_ = filepath.WalkDir("/proc/sys", func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		info, err := d.Info()
		if err != nil || info.Mode().Perm()&0o200 == 0 || info.Mode().Perm()&0o400 == 0 {
			return nil
		}
		if volatileSysctl(p) {
			return nil
		}
		if v, err := readSysctl(p); err == nil {
			out[p] = v
		}
		return nil
	})
	return out
}

func volatileSysctl(p string) bool {
	for _, s := range []string{"/proc/sys/kernel/ns_last_pid", "/proc/sys/kernel/hostname", "/proc/sys/kernel/domainname",
		"/proc/sys/vm/drop_caches", "/proc/sys/kernel/random/", "/proc/sys/net/ipv4/route/flush", "/proc/sys/net/ipv6/route/flush",
		"/proc/sys/fs/binfmt_misc/"} {
		if strings.HasPrefix(p, s) {
			return true
		}
	}
	return false
}

func readSysctl(p string) (string, error) {
	f, err := os.Open(p)
	if err != nil {
		return "", err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, 1<<16))
	return string(data), err
}

// restoreSysctls writes back the host sysctls the node changed (osm-setup's `sysctl --system`, systemd's own
// settings at boot) and removes the packet filter tables it added.
func (n *node) restoreSysctls() {
	if n.sysctls == nil {
		return
	}
	var restored []string
	var failed []string
	for p, before := range n.sysctls {
		now, err := readSysctl(p)
		if err != nil || now == before {
			continue
		}
		if err := os.WriteFile(p, []byte(before), 0); err != nil {
			// Some are views of others (user.max_inotify_watches is fs.inotify.max_user_watches) and come
			// back with them; check again below.
			failed = append(failed, p)
			continue
		}
		restored = append(restored, fmt.Sprintf("%s=%s (node: %s)", strings.ReplaceAll(strings.TrimPrefix(p, "/proc/sys/"), "/", "."),
			strings.Join(strings.Fields(before), " "), strings.Join(strings.Fields(now), " ")))
	}
	for _, p := range failed {
		if now, err := readSysctl(p); err == nil && now != n.sysctls[p] {
			n.t.Errorf("node %s changed the host sysctl %s from %q to %q and it could not be restored", n.name, p, strings.TrimSpace(n.sysctls[p]), strings.TrimSpace(now))
		}
	}
	n.sysctls = nil
	_ = os.Remove(sysctlSnapshotPath())
	if len(restored) > 0 {
		n.t.Logf("node %s: restored the host sysctls it changed: %s", n.name, strings.Join(restored, ", "))
	}
	if n.nftWas != nil {
		var removed []string
		for table := range n.nftTables() {
			if n.nftWas[table] {
				continue
			}
			if out, err := exec.Command("chroot", n.root, "nft", "delete", "table", table).CombinedOutput(); err != nil {
				n.t.Errorf("node %s: removing the packet filter table %q it added to the host: %v %s", n.name, table, err, out)
			} else {
				removed = append(removed, table)
			}
		}
		n.nftWas = nil
		if len(removed) > 0 {
			n.t.Logf("node %s: removed the packet filter tables it added to the host's network namespace: %v", n.name, removed)
		}
	}
}

// nftTables lists the nftables tables of the host's network namespace ("ip filter", ...), with the node's nft.
func (n *node) nftTables() map[string]bool {
	out, err := exec.Command("chroot", n.root, "nft", "list", "tables").CombinedOutput()
	if err != nil {
		n.t.Logf("listing packet filter tables: %v %s", err, out)
		return nil
	}
	tables := map[string]bool{}
	for _, line := range strings.Split(string(out), "\n") {
		if name, ok := strings.CutPrefix(strings.TrimSpace(line), "table "); ok {
			tables[name] = true
		}
	}
	return tables
}

// unitState is one unit's `systemctl show` properties.
type unitState map[string]string

func (u unitState) active() bool { return u["ActiveState"] == "active" }

// restarts is how often systemd restarted the unit after a failure.
func (u unitState) restarts() int { n, _ := strconv.Atoi(u["NRestarts"]); return n }

// failedOnce reports whether the unit's main process has failed at least once (it may be waiting for its
// restart).
func (u unitState) failedOnce() bool {
	return u["ActiveState"] == "failed" || u.restarts() > 0 || (u["Result"] != "" && u["Result"] != "success")
}

func (u unitState) String() string {
	return fmt.Sprintf("%s/%s result=%s restarts=%s exit=%s enablement=%s", u["ActiveState"], u["SubState"], u["Result"], u["NRestarts"], u["ExecMainStatus"], u["UnitFileState"])
}

// parseShow parses `systemctl show` output for several units (blocks separated by empty lines).
func parseShow(s string) map[string]unitState {
	out := map[string]unitState{}
	cur := unitState{}
	flush := func() {
		if id := cur["Id"]; id != "" {
			out[id] = cur
		}
		cur = unitState{}
	}
	for _, line := range strings.Split(s, "\n") {
		if strings.TrimSpace(line) == "" {
			flush()
			continue
		}
		if k, v, ok := strings.Cut(line, "="); ok {
			cur[k] = v
		}
	}
	flush()
	return out
}

// report is what the node saved before it powered off.
type report struct {
	dir      string
	complete bool
	units    map[string]unitState
	failed   []string
	journal  string
	console  string
	node     *node
}

func readReport(t *testing.T, n *node) *report {
	r := &report{dir: filepath.Join(n.dir, "report"), node: n}
	_, err := os.Stat(filepath.Join(r.dir, "complete"))
	r.complete = err == nil
	r.units = parseShow(r.file("units.show"))
	for _, line := range strings.Split(r.file("failed.txt"), "\n") {
		if f := strings.Fields(strings.TrimPrefix(strings.TrimSpace(line), "●")); len(f) > 0 {
			r.failed = append(r.failed, f[0])
		}
	}
	r.journal = r.file("journal.txt")
	if c, err := os.ReadFile(n.console); err == nil {
		r.console = string(c)
	}
	if !r.complete {
		// The node died before it could report (killed by timeout): read its persistent journal directly.
		out, _ := exec.Command("journalctl", "-D", filepath.Join(n.root, "var/log/journal"), "--no-pager", "-o", "short-precise").CombinedOutput()
		r.journal = string(out)
		t.Errorf("node %s: no complete report in %s (nspawn: %v); journal read from the rootfs", n.name, r.dir, n.waitErr)
	}
	return r
}

func (r *report) file(name string) string {
	data, err := os.ReadFile(filepath.Join(r.dir, name))
	if err != nil {
		return ""
	}
	return string(data)
}

// unitJournal is the journal of one unit.
func (r *report) unitJournal(unit string) string {
	if j := r.file("journal-" + unit + ".txt"); j != "" {
		return j
	}
	var b strings.Builder
	for _, line := range strings.Split(r.journal, "\n") {
		if strings.Contains(line, unit) || strings.Contains(line, strings.TrimSuffix(unit, ".service")+"[") {
			b.WriteString(line + "\n")
		}
	}
	return b.String()
}

// diagnose prints where to look when a node check failed: the failing units with their journals, the
// cloud-init status and the paths of the full journal and report.
func (r *report) diagnose(t *testing.T, focus ...string) {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "node %s diagnostics\n  report:  %s\n  journal: %s\n  console: %s\n", r.node.name, r.dir, filepath.Join(r.dir, "journal.txt"), r.node.console)
	fmt.Fprintf(&b, "  system state: %s", r.file("system-state.txt"))
	fmt.Fprintf(&b, "  failed units: %v\n", r.failed)
	for _, u := range slices.Sorted(maps.Keys(r.units)) {
		fmt.Fprintf(&b, "  %-32s %s\n", u, r.units[u])
	}
	fmt.Fprintf(&b, "--- cloud-init status --long ---\n%s", r.file("cloud-init-status.txt"))
	if res := r.file("result.json"); res != "" {
		fmt.Fprintf(&b, "--- /run/cloud-init/result.json ---\n%s\n", res)
	}
	seen := map[string]bool{}
	for _, u := range append(append([]string{}, focus...), r.failed...) {
		if seen[u] {
			continue
		}
		seen[u] = true
		fmt.Fprintf(&b, "--- journal of %s (last 40 lines; %s) ---\n%s", u, filepath.Join(r.dir, "journal-"+u+".txt"), tail(r.unitJournal(u), 40))
	}
	if !r.complete {
		fmt.Fprintf(&b, "--- console (last 30 lines) ---\n%s", tail(r.console, 30))
		fmt.Fprintf(&b, "--- journal (last 60 lines) ---\n%s", tail(r.journal, 60))
	}
	t.Log(b.String())
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n") + "\n"
}

// fileInRoot describes a file of the node's rootfs.
type fileInRoot struct {
	mode    os.FileMode
	content []byte
	exists  bool
}

func (n *node) file(path string) fileInRoot {
	p := filepath.Join(n.root, path)
	info, err := os.Lstat(p)
	if err != nil {
		return fileInRoot{}
	}
	data, _ := os.ReadFile(p)
	return fileInRoot{mode: info.Mode(), content: data, exists: true}
}

// enabledIn reports whether the unit is enabled in the node's rootfs: a symlink to it in some *.wants
// directory of /etc/systemd/system (what `systemctl enable` creates for WantedBy=).
func (n *node) enabledIn(unit string) (bool, string) {
	matches, _ := filepath.Glob(filepath.Join(n.root, "etc/systemd/system/*.wants", unit))
	if len(matches) == 0 {
		return false, ""
	}
	rel, _ := filepath.Rel(n.root, matches[0])
	return true, "/" + rel
}

// masked reports whether the unit is masked (a symlink to /dev/null in /etc/systemd/system).
func (n *node) masked(unit string) bool {
	target, err := os.Readlink(filepath.Join(n.root, "etc/systemd/system", unit))
	return err == nil && target == "/dev/null"
}

var ansi = regexp.MustCompile(`\x1b\[[0-9;]*m`)

func grepLines(s, pattern string) []string {
	re := regexp.MustCompile(pattern)
	var out []string
	for _, line := range strings.Split(ansi.ReplaceAllString(s, ""), "\n") {
		if re.MatchString(line) {
			out = append(out, line)
		}
	}
	return out
}
