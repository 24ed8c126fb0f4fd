package hack

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestInstallDepsSaysWhatItChanges runs hack/install-deps.sh with stand-ins for dpkg-query and apt-get on
// PATH: it names every package it installs, and when the install would upgrade a package the host has, it
// lists the upgrade and installs nothing unless OSM_INSTALL_DEPS_UPGRADE=1.
func TestInstallDepsSaysWhatItChanges(t *testing.T) {
	withUpgrade := "Inst systemd [252.30-1~deb12u2] (252.36-1~deb12u1 Debian:12.11/stable [amd64])\nInst systemd-container (252.36-1~deb12u1 Debian:12.11/stable [amd64])\n"
	plain := "Inst zstd (1.5.4+dfsg2-5 Debian:12.11/stable [amd64])\n"
	for _, tt := range []struct {
		name, plan, optIn string
		wantCode          int
		installed         bool
		stderr            []string
	}{
		{"upgrade refused", withUpgrade, "", 3, false, []string{"installing cloud-init mmdebstrap zstd systemd-container libblkid-dev", "also upgrades packages the host already has", "systemd 252.30-1~deb12u2 -> 252.36-1~deb12u1", "OSM_INSTALL_DEPS_UPGRADE=1"}},
		{"upgrade allowed", withUpgrade, "1", 0, true, []string{"systemd 252.30-1~deb12u2 -> 252.36-1~deb12u1", "upgrading them"}},
		{"new packages only", plain, "", 0, true, []string{"new packages:", "  zstd 1.5.4+dfsg2-5"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			bin := t.TempDir()
			log := filepath.Join(bin, "installed")
			stub := func(name, body string) {
				if err := os.WriteFile(filepath.Join(bin, name), []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			stub("dpkg-query", "exit 1")
			stub("id", "echo 0") // root: no sudo in front of the stand-in apt-get
			stub("apt-get", `case " $* " in *" -s "*) printf '%s' '`+tt.plan+`' ;; *" install "*) echo "$*" >>`+log+` ;; esac`)
			cmd := exec.Command("bash", "install-deps.sh", "node-e2e")
			cmd.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"), "OSM_INSTALL_DEPS_UPGRADE="+tt.optIn)
			out, err := cmd.CombinedOutput()
			code := 0
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				code = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if code != tt.wantCode {
				t.Errorf("exit %d, want %d:\n%s", code, tt.wantCode, out)
			}
			_, statErr := os.Stat(log)
			if installed := statErr == nil; installed != tt.installed {
				t.Errorf("installed: %v, want %v:\n%s", installed, tt.installed, out)
			}
			for _, w := range tt.stderr {
				if !strings.Contains(string(out), w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
		})
	}
}
