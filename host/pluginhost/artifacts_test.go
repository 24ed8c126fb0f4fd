package pluginhost

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/osmhq/osm/sdk/runtime"
)

// The directories this build's hosts read code from (runtime.CodeDirs): what a host checks.
var (
	wzDir   = runtime.CodeDirs()[0]
	snapDir = runtime.CodeDirs()[2]
)

func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for rel, content := range files {
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// TestVerifyArtifacts: a cache passes when every file a host reads code from has the digest recorded for it.
func TestVerifyArtifacts(t *testing.T) {
	compiled := map[string]string{
		wzDir + "/aaaa": "A's code", wzDir + "/kernel": "kernel",
		snapDir + "/a.wasm": "snapshot", "stamp": "build", "osm-compiled/v1/marker": "",
	}
	for _, tt := range []struct {
		name     string
		change   func(t *testing.T, dir string)
		mismatch string
	}{
		{"unchanged", func(*testing.T, string) {}, ""},
		{"code replaced", func(t *testing.T, dir string) {
			writeFiles(t, dir, map[string]string{wzDir + "/aaaa": "B's code"})
		}, wzDir + "/aaaa (digest"},
		{"code rewritten in place, its modification time set back", func(t *testing.T, dir string) {
			p := filepath.Join(dir, wzDir+"/aaaa")
			fi, err := os.Stat(p)
			if err != nil {
				t.Fatal(err)
			}
			f, err := os.OpenFile(p, os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.WriteAt([]byte("B"), 0); err != nil {
				t.Fatal(err)
			}
			_ = f.Close()
			if err := os.Chtimes(p, fi.ModTime(), fi.ModTime()); err != nil {
				t.Fatal(err)
			}
		}, wzDir + "/aaaa (digest"},
		{"snapshot replaced", func(t *testing.T, dir string) {
			writeFiles(t, dir, map[string]string{snapDir + "/a.wasm": "other"})
		}, snapDir + "/a.wasm (digest"},
		{"entry added", func(t *testing.T, dir string) {
			writeFiles(t, dir, map[string]string{"nointerrupt/" + wzDir + "/bbbb": "B's code"})
		}, "nointerrupt/" + wzDir + "/bbbb (not recorded)"},
		{"entry removed: compiled in memory", func(t *testing.T, dir string) {
			if err := os.Remove(filepath.Join(dir, wzDir+"/aaaa")); err != nil {
				t.Fatal(err)
			}
		}, ""},
		{"another build's code, which no host here opens", func(t *testing.T, dir string) {
			writeFiles(t, dir, map[string]string{"wazero-v0.0.1-amd64-linux/cccc": "C's code", "osm-snapshots/v0.0.1/c.wasm": "C"})
		}, ""},
		{"files no host reads code from", func(t *testing.T, dir string) {
			writeFiles(t, dir, map[string]string{"stamp": "other", "osm-compiled/v1/marker": "x", "tenants/bbbb/wazero-v1-amd64-linux/x": "y"})
		}, ""},
		{"entry replaced by a link to other code", func(t *testing.T, dir string) {
			other := filepath.Join(t.TempDir(), "b")
			writeFiles(t, filepath.Dir(other), map[string]string{"b": "B's code"})
			p := filepath.Join(dir, wzDir+"/aaaa")
			if err := os.Remove(p); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(other, p); err != nil {
				t.Fatal(err)
			}
		}, wzDir + "/aaaa (digest"},
	} {
		// Each case twice: hashing every file, and with the supervisor's stamps taken before the change
		// (Stamp): a stamped file that changed is hashed again, so the verdicts are the same.
		for _, stamped := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/stamped=%t", tt.name, stamped), func(t *testing.T) {
				dir := t.TempDir()
				writeFiles(t, dir, compiled)
				arts, err := hashArtifacts(dir)
				if err != nil {
					t.Fatal(err)
				}
				if len(arts) != 3 {
					t.Fatalf("recorded %v, want the 3 files holding code", arts)
				}
				var stamps Stamps
				if stamped {
					if stamps = stampArtifacts(dir, arts); len(stamps) != 3 {
						t.Fatalf("stamped %v, want the 3 files holding code", stamps)
					}
				}
				tt.change(t, dir)
				err = verifyArtifacts(dir, arts, stamps)
				switch {
				case tt.mismatch == "" && err != nil:
					t.Errorf("verify: %v, want no mismatch", err)
				case tt.mismatch != "" && (err == nil || !strings.Contains(err.Error(), tt.mismatch)):
					t.Errorf("verify: %v, want a mismatch naming %q", err, tt.mismatch)
				}
			})
		}
	}
}

// TestStampsSpareTheHash: a file whose stamp is unchanged is not read again: its digest is the stamp's. A
// stamp carrying a wrong digest shows it (a mismatch although the file is as recorded); once the file is
// written, its stamp no longer matches and it is hashed.
func TestStampsSpareTheHash(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{wzDir + "/aaaa": "A's code"})
	arts, err := hashArtifacts(dir)
	if err != nil {
		t.Fatal(err)
	}
	stamps := stampArtifacts(dir, arts)
	st := stamps[wzDir+"/aaaa"]
	st.Digest = "sha256:0000"
	stamps[wzDir+"/aaaa"] = st
	if err := verifyArtifacts(dir, arts, stamps); err == nil || !strings.Contains(err.Error(), "sha256:0000") {
		t.Errorf("verify with a stamp's digest of its own: %v, want the stamp's digest taken", err)
	}
	writeFiles(t, dir, map[string]string{wzDir + "/aaaa": "A's code"})
	if err := verifyArtifacts(dir, arts, stamps); err != nil {
		t.Errorf("verify after the file was written: %v, want it hashed (and as recorded)", err)
	}
	// Nothing is stamped that does not have the recorded digest.
	if got := stampArtifacts(dir, Artifacts{wzDir + "/aaaa": "sha256:0000"}); len(got) != 0 {
		t.Errorf("stamped %v against another digest, want nothing", got)
	}
}

// TestAHostRefusesChangedCode: a tenant's host whose cache differs from the digests it was given ends before
// it reads any module, with exitTampered, and says why; it never tells the supervisor it is ready.
func TestAHostRefusesChangedCode(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{wzDir + "/aaaa": "A's code"})
	arts, err := hashArtifacts(dir)
	if err != nil {
		t.Fatal(err)
	}
	writeFiles(t, dir, map[string]string{wzDir + "/aaaa": "B's code"})
	cfg, err := json.Marshal(HostConfig{CacheDir: dir, ReadOnlyCache: true, Artifacts: arts, Role: roleTenant, Landlock: true})
	if err != nil {
		t.Fatal(err)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe)
	cmd.Env = hostEnv(string(cfg))
	var stdout, stderr bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = strings.NewReader(""), &stdout, &stderr
	err = cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != exitTampered {
		t.Fatalf("host: %v, want exit status %d; stderr: %s", err, exitTampered, stderr.String())
	}
	if stdout.Len() != 0 {
		t.Errorf("the host wrote %d bytes to the supervisor (want none: not even ready)", stdout.Len())
	}
	if !strings.Contains(stderr.String(), tamperedPrefix) || !strings.Contains(stderr.String(), wzDir+"/aaaa") {
		t.Errorf("stderr %q: want the changed file named", stderr.String())
	}
}

// TestEveryHostOfGuestCodeReadsTheCacheOnly: the supervisor starts every host that runs guest code (the
// built-in one and a tenant's) with a read-only cache under Landlock and the digests to check it against.
func TestEveryHostOfGuestCodeReadsTheCacheOnly(t *testing.T) {
	s, err := New(Config{Host: HostConfig{CacheDir: t.TempDir(), Artifacts: Artifacts{"wazero-v1/x": "sha256:1"}}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	tenant := "sha256:" + strings.Repeat("ab", 32)
	s.compiled[tenant] = Artifacts{"wazero-v1/y": "sha256:2"}
	for key, want := range map[string]HostConfig{
		builtinKey: {Role: roleBuiltin, CacheDir: BuiltinDir(s.cfg.Host.CacheDir), Artifacts: s.cfg.Host.Artifacts},
		tenant:     {Role: roleTenant, CacheDir: s.tenantDir(tenant), Artifacts: s.compiled[tenant], NoSnapshot: true},
	} {
		hc := s.hostConfig(key)
		if !hc.ReadOnlyCache || !hc.Landlock || hc.Role != want.Role || hc.CacheDir != want.CacheDir || hc.NoSnapshot != want.NoSnapshot ||
			len(hc.Artifacts) != 1 || !equalArtifacts(hc.Artifacts, want.Artifacts) {
			t.Errorf("%s host: %+v, want read-only under Landlock, %+v", key, hc, want)
		}
	}
}

func equalArtifacts(a, b Artifacts) bool {
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return len(a) == len(b)
}

// TestShippedCodeOnAReadOnlyFileSystemIsNotHashed: code on a file system mounted read-only (the image's, with
// readOnlyRootFilesystem) is stamped with the digest the build recorded, unread; the same file on a writable
// file system is hashed, and a seeded link pointed at a writable copy is not taken on the read-only file's word.
// The manifest here records a digest the content does not have, so a stamp tells which way was taken.
func TestShippedCodeOnAReadOnlyFileSystemIsNotHashed(t *testing.T) {
	if testing.Short() {
		t.Skip("mounts a read-only file system (root); make test runs it")
	}
	if os.Geteuid() != 0 {
		t.Fatal("mounting a read-only bind of a directory needs root, as make test runs")
	}
	shipped, mnt := t.TempDir(), t.TempDir()
	writeFiles(t, shipped, map[string]string{wzDir + "/aaaa": "A's code"})
	recorded := Artifacts{wzDir + "/aaaa": "sha256:recorded-by-the-build"}
	if got := stampArtifacts(shipped, recorded); len(got) != 0 {
		t.Fatalf("writable: stamped %v, want the file hashed and, its digest not the recorded one, unstamped", got)
	}
	if err := unix.Mount(shipped, mnt, "", unix.MS_BIND, ""); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = unix.Unmount(mnt, unix.MNT_DETACH) })
	if err := unix.Mount("", mnt, "", unix.MS_REMOUNT|unix.MS_BIND|unix.MS_RDONLY, ""); err != nil {
		t.Fatal(err)
	}
	cache := filepath.Join(t.TempDir(), "builtin")
	if err := SeedCache(cache, mnt); err != nil {
		t.Fatal(err)
	}
	stamps := stampArtifacts(cache, recorded)
	if got := stamps[wzDir+"/aaaa"].Digest; got != recorded[wzDir+"/aaaa"] {
		t.Fatalf("read-only: stamp digest %q, want the recorded one taken unread", got)
	}
	// A host finds the stamp still good, so it takes the recorded digest too.
	if err := verifyArtifacts(cache, recorded, stamps); err != nil {
		t.Errorf("verify over the read-only file: %v", err)
	}
	// The link pointed at a writable copy: another file, hashed, and refused.
	copyDir := t.TempDir()
	writeFiles(t, copyDir, map[string]string{wzDir + "/aaaa": "B's code"})
	link := filepath.Join(cache, filepath.FromSlash(wzDir+"/aaaa"))
	if err := os.Remove(link); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(copyDir, filepath.FromSlash(wzDir+"/aaaa")), link); err != nil {
		t.Fatal(err)
	}
	if err := verifyArtifacts(cache, recorded, stamps); err == nil {
		t.Error("verify after the link was pointed at a writable file: passed, want it hashed and refused")
	}
	if got := stampArtifacts(cache, recorded); len(got) != 0 {
		t.Errorf("stamped %v through a link to a writable file, want nothing", got)
	}
}
