//go:build e2e

package e2e

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// A labelDevice is a small block device with a labelled file system, which an Ignition image of a shape that
// reads its user config from one (openSUSE MicroOS: the file system labelled "ignition") finds at
// /dev/disk/by-label/<label>, as a VM finds an attached config drive. It is a sparse file with an ext4 file
// system, attached to a loop device for the node's lifetime: detached and removed when the node is cleaned up,
// or by the next run's recoverStaleRun when this one was killed first (backing files are named
// labelImagePrefix*).
//
// How the node gets it, and why that works on this host (tried with systemd 252 on a hybrid cgroup host):
// systemd-nspawn binds the loop device's node to /dev/disk/by-label/<label> in the container's /dev (--bind;
// nspawn gives the container no /dev/loop* of its own). The node's root may mount it because nspawn keeps
// CAP_SYS_ADMIN and runs the container in the host's user namespace (no --private-users), where the kernel
// lets it mount a block device. No device policy stands in the way: nspawn's (DeviceAllow= on the scope unit
// it registers) is not set up with --register=no --keep-unit, the node's cgroup v2 has no device program
// attached, and in the cgroup v1 devices hierarchy the node stays in the harness's cgroup, which allows every
// device. A host whose cgroups restrict devices would need the loop device's major:minor allowed for the
// node.
type labelDevice struct {
	name  string // the label
	image string // the backing file
	dev   string // the loop device, e.g. /dev/loop3
}

// labelImagePrefix names the backing files, so that a later run finds the loop devices of a killed one.
const labelImagePrefix = "osm-e2e-label-"

// labelSize is the file system's size: room for an Ignition config (a few hundred KB) and ext4's metadata.
const labelSize = 16 << 20

func newLabelDevice(t *testing.T, dir, label string) *labelDevice {
	t.Helper()
	l := &labelDevice{name: label, image: filepath.Join(dir, labelImagePrefix+label+".img")}
	f, err := os.Create(l.image)
	if err == nil {
		err = errors.Join(f.Truncate(labelSize), f.Close())
	}
	if err != nil {
		t.Fatalf("the file system labelled %s: %v", label, err)
	}
	if out, err := exec.Command("mkfs.ext4", "-q", "-F", "-L", label, l.image).CombinedOutput(); err != nil {
		t.Fatalf("mkfs.ext4 -L %s: %v\n%s", label, err, out)
	}
	out, err := exec.Command("losetup", "--find", "--show", l.image).CombinedOutput()
	if err != nil {
		t.Fatalf("losetup %s: %v\n%s", l.image, err, out)
	}
	l.dev = strings.TrimSpace(string(out))
	return l
}

// detach detaches the loop device and removes the backing file.
func (l *labelDevice) detach() error {
	var errs []error
	if out, err := exec.Command("losetup", "--detach", l.dev).CombinedOutput(); err != nil {
		errs = append(errs, fmt.Errorf("losetup --detach %s: %w %s", l.dev, err, out))
	}
	if err := os.Remove(l.image); err != nil && !errors.Is(err, os.ErrNotExist) {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// entries lists a directory of the labelled file system (names only, without . and ..), read in user space
// with debugfs; exists is false when the directory is not there.
func (l *labelDevice) entries(dir string) (names []string, exists bool, err error) {
	var stdout, stderr bytes.Buffer
	cmd := exec.Command("debugfs", "-R", "ls -p "+dir, l.dev)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, false, fmt.Errorf("debugfs ls %s: %w %s", dir, err, stderr.String())
	}
	if strings.Contains(stderr.String(), "File not found") {
		return nil, false, nil
	}
	// ls -p: /inode/mode/uid/gid/name/size/ a line.
	for _, line := range strings.Split(stdout.String(), "\n") {
		f := strings.Split(strings.TrimSpace(line), "/")
		if len(f) >= 6 && f[5] != "." && f[5] != ".." && f[5] != "" {
			names = append(names, f[5])
		}
	}
	return names, true, nil
}

// recoverStaleLabels detaches the loop devices of labelled file systems a killed run left attached and removes
// their backing files.
func recoverStaleLabels() []string {
	out, err := exec.Command("losetup", "--list", "--noheadings", "--output", "NAME,BACK-FILE").Output()
	if err != nil {
		return nil
	}
	var recovered []string
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 || !strings.HasPrefix(filepath.Base(f[1]), labelImagePrefix) {
			continue
		}
		l := &labelDevice{dev: f[0], image: strings.TrimSuffix(f[1], " (deleted)")}
		if err := l.detach(); err != nil {
			fmt.Fprintf(os.Stderr, "node e2e: a labelled file system of an earlier run: %v\n", err)
			continue
		}
		recovered = append(recovered, f[0]+" ("+f[1]+")")
	}
	return recovered
}
