// Package cloudinittest checks user-data with the real cloud-init: `cloud-init schema -c`, the validator of the
// program that will consume it on the node.
package cloudinittest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/osmhq/osm/host/testenv"
)

var (
	installOnce sync.Once
	installErr  error
)

// Binary returns the path of cloud-init, installing the Debian package through hack/install-deps.sh when it is
// missing, so tests run on a fresh machine.
func Binary(t testing.TB) string {
	t.Helper()
	if p, err := exec.LookPath("cloud-init"); err == nil {
		return p
	}
	installOnce.Do(func() {
		out, err := exec.Command(filepath.Join(testenv.RepoRoot(), "hack", "install-deps.sh"), "validate").CombinedOutput()
		if err != nil {
			installErr = &installError{err: err, out: string(out)}
		}
	})
	if installErr != nil {
		t.Fatalf("installing cloud-init: %v", installErr)
	}
	p, err := exec.LookPath("cloud-init")
	if err != nil {
		t.Fatalf("cloud-init not found after installing it: %v", err)
	}
	return p
}

type installError struct {
	err error
	out string
}

func (e *installError) Error() string { return e.err.Error() + "\n" + e.out }

// Validate fails the test unless cloud-init accepts data as valid cloud-config with no deprecations.
func Validate(t testing.TB, name string, data []byte) {
	t.Helper()
	if err := Check(t, data); err != nil {
		t.Errorf("%s: cloud-init schema rejects the user-data: %v\n--- user-data ---\n%s", name, err, data)
	}
}

// Check runs cloud-init's schema validation and returns its complaint, if any.
func Check(t testing.TB, data []byte) error {
	t.Helper()
	bin := Binary(t)
	path := filepath.Join(t.TempDir(), "user-data")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, "schema", "-c", path).CombinedOutput()
	text := string(out)
	if err != nil {
		return &schemaError{out: strings.TrimSpace(text)}
	}
	if !strings.Contains(text, "Valid cloud-config") || strings.Contains(strings.ToLower(text), "deprecat") {
		return &schemaError{out: strings.TrimSpace(text)}
	}
	return nil
}

type schemaError struct{ out string }

func (e *schemaError) Error() string { return e.out }
