package buildinfo

import (
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestVersionOfABuiltBinary builds osmctl twice, in this checkout and with the release version stamped, and
// checks what `osmctl version` says: the VCS revision of the checkout, and the stamped version.
func TestVersionOfABuiltBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds osmctl")
	}
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(file), "..", "..")
	head, err := exec.Command("git", "-C", root, "rev-parse", "HEAD").Output()
	if err != nil {
		t.Skipf("not a git checkout: %v", err)
	}
	dir := t.TempDir()
	for _, b := range []struct{ name, ldflags, want string }{
		{"devel", "", ""}, // the toolchain's version of the checkout: a pseudo-version, or the tag at HEAD
		{"release", "-X github.com/osmhq/osm/host/buildinfo.Version=v9.8.7", "v9.8.7"},
	} {
		bin := filepath.Join(dir, b.name)
		// -buildvcs=true: the environment may turn VCS stamping off (GOFLAGS); release builds turn it on.
		cmd := exec.Command("go", "build", "-buildvcs=true", "-ldflags", b.ldflags, "-o", bin, "./cmd/osmctl")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go build: %v\n%s", err, out)
		}
		out, err := exec.Command(bin, "version").CombinedOutput()
		if err != nil {
			t.Fatalf("osmctl version: %v\n%s", err, out)
		}
		got := string(out)
		if !strings.HasPrefix(got, b.want) || !strings.Contains(got, " (commit "+strings.TrimSpace(string(head))) || strings.HasPrefix(got, "devel") {
			t.Errorf("%s build: osmctl version = %q, want %s and commit %s", b.name, got, b.want, head)
		}
	}
}

func TestShort(t *testing.T) {
	for _, tt := range []struct {
		i    Info
		want string
	}{
		{Info{Version: "v0.1.0", Revision: "0123456789abcdef"}, "v0.1.0"},
		{Info{Version: "devel", Revision: "0123456789abcdef", Modified: true}, "devel+0123456789ab-dirty"},
		{Info{Version: "devel"}, "devel"},
	} {
		if got := tt.i.Short(); got != tt.want {
			t.Errorf("%+v.Short() = %q, want %q", tt.i, got, tt.want)
		}
	}
}
