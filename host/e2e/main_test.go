//go:build e2e

// Package e2e boots real nodes from OSM's user-data: a Debian rootfs under systemd-nspawn runs the bootstrap
// user-data OSM wrote for a MachineDeployment, fetches its provisioning configuration from a real
// kube-apiserver, provisions itself (containerd, kubelet, ...) from a local binary mirror, and its kubelet asks
// the API server for a client certificate with its bootstrap token.
//
// Run it with `make e2e-node` (as root): the make target builds the node rootfs and binaries
// (hack/e2e-node/*.sh, cached under ~/.cache/osm/e2e-node), then runs `go test -tags e2e ./host/e2e`.
// The build tag keeps it out of a plain `go test ./...`.
//
// Environment:
//
//	OSM_E2E_ARTIFACTS  directory for node reports, controller log and audit log (default: a new temp dir,
//	                   printed at the end; removed only when every test passed and OSM_E2E_KEEP is unset)
//	OSM_E2E_KEEP=1     keep node root filesystems even when the tests pass
//
// TestConformance is the vendor conformance run (`make conformance`): a node booted from a vendor's plugin and
// profile on the vendor's root file system, each step of the boot contract reported; its OSM_CONFORMANCE_*
// variables are described in conformance_test.go. Without them it is skipped.
package e2e

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/osmhq/osm/host/testenv"
)

// harness holds what TestMain prepared.
var harness struct {
	// Rootfs is the node image tarball (hack/e2e-node/rootfs.sh).
	Rootfs string
	// Mirror is the local binary mirror directory (hack/e2e-node/binaries.sh).
	Mirror string
	// Ignition is the ignition binary.
	Ignition string
	// Artifacts is where reports and logs are kept.
	Artifacts string
	// KubeVersion, CNIVersion and CRICtlVersion are what the mirror serves.
	KubeVersion, CNIVersion, CRICtlVersion string
	// Cache is the node e2e cache directory (hack/e2e-node/binaries.sh).
	Cache string
	// lock is held while this process boots nodes: nodes share the host's kernel settings and network
	// namespace, so two runs on one host would undo each other's changes.
	lock *os.File
}

func TestMain(m *testing.M) {
	// controller-runtime's global logger (envtest's messages); the controller logs through its own.
	ctrllog.SetLogger(logr.Discard())
	if err := setup(); err != nil {
		fmt.Fprintf(os.Stderr, "node e2e setup: %v\n", err)
		os.Exit(1)
	}
	code := m.Run()
	if osmctl.path != "" {
		_ = os.RemoveAll(filepath.Dir(osmctl.path))
	}
	if code == 0 && os.Getenv("OSM_E2E_ARTIFACTS") == "" && os.Getenv("OSM_E2E_KEEP") == "" {
		_ = os.RemoveAll(harness.Artifacts)
	} else {
		fmt.Fprintf(os.Stderr, "node e2e artifacts (node reports, journals, controller and audit logs): %s\n", harness.Artifacts)
	}
	os.Exit(code)
}

func setup() error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("booting nodes with systemd-nspawn needs root")
	}
	for _, bin := range []string{"systemd-nspawn", "unshare", "timeout", "tar", "zstd", "chroot"} {
		if _, err := exec.LookPath(bin); err != nil {
			return fmt.Errorf("%s not found: run hack/install-deps.sh node-e2e", bin)
		}
	}
	root := testenv.RepoRoot()
	// Both scripts return at once when their outputs are cached.
	if _, err := script(filepath.Join(root, "hack", "e2e-node", "binaries.sh")); err != nil {
		return err
	}
	rootfs, err := script(filepath.Join(root, "hack", "e2e-node", "rootfs.sh"))
	if err != nil {
		return err
	}
	harness.Rootfs = strings.TrimSpace(rootfs)
	envOut, err := script(filepath.Join(root, "hack", "e2e-node", "binaries.sh"), "env")
	if err != nil {
		return err
	}
	vars := map[string]string{}
	for _, line := range strings.Split(envOut, "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			vars[k] = v
		}
	}
	harness.Mirror, harness.Ignition, harness.Cache = vars["E2E_MIRROR"], vars["E2E_IGNITION"], vars["E2E_CACHE"]
	if err := lockHost(); err != nil {
		return err
	}
	recoverStaleRun()
	harness.KubeVersion, harness.CNIVersion, harness.CRICtlVersion = vars["E2E_KUBE_VERSION"], vars["E2E_CNI_VERSION"], vars["E2E_CRICTL_VERSION"]
	if harness.Artifacts = os.Getenv("OSM_E2E_ARTIFACTS"); harness.Artifacts != "" {
		err = os.MkdirAll(harness.Artifacts, 0o755)
	} else {
		harness.Artifacts, err = os.MkdirTemp("", "osm-e2e-")
	}
	if err != nil {
		return err
	}
	return os.Chmod(harness.Artifacts, 0o755)
}

// lockHost takes the host-wide lock of node e2e runs, waiting for another run to finish.
func lockHost() error {
	path := filepath.Join(harness.Cache, "run.lock")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		fmt.Fprintf(os.Stderr, "node e2e: another run holds %s; waiting for it\n", path)
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
			return err
		}
	}
	harness.lock = f
	return nil
}

// recoverStaleRun undoes what a run killed before its cleanup left behind: nodes still running in their
// cgroups (killed through cgroup.kill), the cgroups, the loop devices of labelled file systems, and host sysctls the node changed (restored from the
// snapshot taken before its boot). Packet filter tables it added cannot be told apart from others' and are
// left alone.
func recoverStaleRun() {
	for _, root := range cgroupRoots() {
		stale, _ := filepath.Glob(filepath.Join(root, "osm-e2e-*"))
		for _, cg := range stale {
			_ = os.WriteFile(filepath.Join(cg, "cgroup.kill"), []byte("1"), 0)
			for i := 0; i < 50 && cgroupBusy(cg); i++ {
				time.Sleep(100 * time.Millisecond) // polling interval
			}
			if err := removeCgroupTree(cg); err != nil {
				fmt.Fprintf(os.Stderr, "node e2e: stale cgroup %s of an earlier run: %v\n", cg, err)
			} else {
				fmt.Fprintf(os.Stderr, "node e2e: removed stale cgroup %s of an earlier run\n", cg)
			}
		}
	}
	if detached := recoverStaleLabels(); len(detached) > 0 {
		fmt.Fprintf(os.Stderr, "node e2e: detached the labelled file systems of an earlier run: %s\n", strings.Join(detached, ", "))
	}
	if restored := restoreSysctlSnapshot(); len(restored) > 0 {
		fmt.Fprintf(os.Stderr, "node e2e: restored host sysctls an earlier run left changed: %s\n", strings.Join(restored, ", "))
	}
}

// script runs one of the hack/e2e-node scripts and returns its stdout; its stderr (build progress) goes to
// ours.
func script(path string, args ...string) (string, error) {
	var stdout bytes.Buffer
	cmd := exec.Command(path, args...)
	cmd.Stdout, cmd.Stderr = &stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("%s %s: %w", path, strings.Join(args, " "), err)
	}
	return stdout.String(), nil
}
