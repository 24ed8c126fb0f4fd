package abi

import (
	"io/fs"
	"strings"
	"testing"
)

// TestPlainFileTakesGoOctal checks that a mode written the way Go writes modes reaches the wire as upstream
// OSM's "decimal digits read as octal", and back.
func TestPlainFileTakesGoOctal(t *testing.T) {
	for _, tt := range []struct {
		mode fs.FileMode
		wire int32
	}{{0o644, 644}, {0644, 644}, {0o600, 600}, {0o755, 755}, {0o700, 700}, {0o400, 400}, {0o4755, 4755}, {0, 0}} {
		f := PlainFile("/etc/a", tt.mode, "a")
		if *f.Permissions != tt.wire {
			t.Errorf("PlainFile(%#o) wire = %d, want %d", uint32(tt.mode), *f.Permissions, tt.wire)
		}
		back, err := f.Mode()
		if err != nil || back != tt.mode {
			t.Errorf("Mode() of wire %d = %#o, %v; want %#o", tt.wire, uint32(back), err, uint32(tt.mode))
		}
	}
}

// TestPlainFileRefusesDecimalModes replays the trap of the old API: a mode written in decimal must stop the
// first call with a message saying how to write it, not become another mode.
func TestPlainFileRefusesDecimalModes(t *testing.T) {
	for _, tt := range []struct {
		mode fs.FileMode
		want string
	}{
		{644, "write 0o644"}, {600, "write 0o600"}, {755, "write 0o755"}, {700, "write 0o700"},
		{400, "decimal 400"}, {444, "decimal 444"}, {440, "decimal 440"}, {500, "decimal 500"},
		{0o1777, "not a file permission"}, {0o10644, "not a file permission"}, {fs.ModeDir | 0o755, "not a file permission"},
	} {
		func() {
			defer func() {
				msg, _ := recover().(string)
				if !strings.Contains(msg, tt.want) || !strings.Contains(msg, `abi.PlainFile("/etc/a")`) {
					t.Errorf("PlainFile(%d) panic = %q, want it to name the call and contain %q", uint32(tt.mode), msg, tt.want)
				}
			}()
			PlainFile("/etc/a", tt.mode, "a")
		}()
	}
}

func TestModeRefusesBadWireValues(t *testing.T) {
	for _, wire := range []int32{384, 648, -1, 77777} {
		f := File{Path: "/etc/a", Permissions: &wire}
		if _, err := f.Mode(); err == nil || !strings.Contains(err.Error(), "/etc/a") {
			t.Errorf("Mode() of wire %d: err = %v, want a refusal naming the file", wire, err)
		}
	}
	if m, err := (&File{Path: "/a"}).Mode(); m != 0 || err != nil {
		t.Errorf("no permissions: %v, %v", m, err)
	}
}
