package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestNoSignatureLibraries: the controller and the plugin host, which every module's host process pays for,
// link neither signature library nor the package that uses them. Their package initialisers cost the
// controller 8 MiB at start and their code ~16 MiB resident at its peak (docs/measuring.md); signatures are
// verified in cmd/osm-plugin-verify (package verifyproc). The verifier must link them, which shows the check
// can fail.
func TestNoSignatureLibraries(t *testing.T) {
	banned := []string{"github.com/sigstore/", "github.com/notaryproject/", "github.com/osmhq/osm/host/signature\n"}
	for _, tt := range []struct {
		pkg  string
		want bool
	}{
		{"github.com/osmhq/osm/cmd/osm-controller", false},
		{"github.com/osmhq/osm/cmd/osm-plugin-host", false},
		{"github.com/osmhq/osm/cmd/osm-plugin-verify", true},
	} {
		out, err := exec.Command("go", "list", "-deps", tt.pkg).Output()
		if err != nil {
			t.Fatalf("go list -deps %s: %v", tt.pkg, err)
		}
		deps := string(out)
		for _, b := range banned {
			if got := strings.Contains(deps, b); got != tt.want {
				t.Errorf("%s links %q: %v, want %v", tt.pkg, strings.TrimSpace(b), got, tt.want)
			}
		}
	}
}
