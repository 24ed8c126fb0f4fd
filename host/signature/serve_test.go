package signature

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// envConfineProbe runs the test binary as a process that confines itself as the verifier does (Confine) and
// then tries what a flaw in the signature parsers could: read a file given in the variable (the service
// account token, say), write one, and connect to a TCP address: "confine|file|address", or "none|..." to try
// the same unconfined.
const envConfineProbe = "OSM_TEST_VERIFIER_CONFINE_PROBE"

func init() {
	spec, ok := os.LookupEnv(envConfineProbe)
	if !ok {
		return
	}
	parts := strings.SplitN(spec, "|", 3)
	mode, file, addr := parts[0], parts[1], parts[2]
	if mode == "confine" {
		if err := Confine(); err != nil {
			fmt.Println("confine:", err)
			os.Exit(2)
		}
	}
	_, err := os.ReadFile(file)
	fmt.Printf("read %t\n", err == nil)
	err = os.WriteFile(filepath.Join(filepath.Dir(file), "written"), []byte("x"), 0o644)
	fmt.Printf("write %t\n", err == nil)
	conn, err := net.Dial("tcp", addr)
	if err == nil {
		conn.Close()
	}
	fmt.Printf("connect %t\n", err == nil)
	os.Exit(0)
}

// TestVerifierReadsNothing: once confined, the verifier process can read no file, write none and connect
// nowhere; only its standard input and output are open to it. Enforced by Landlock (file system since Linux
// 5.13, TCP since 6.7), so this test fails on a kernel without it; there the verifier still holds no
// credential of its own (an empty environment, no pull Secret), but could read what the controller's user can.
func TestVerifierReadsNothing(t *testing.T) {
	dir := t.TempDir()
	secret := filepath.Join(dir, "token")
	if err := os.WriteFile(secret, []byte("a service account token"), 0o600); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	// Unconfined, the probe can do all three: what the confined one cannot is Confine's doing.
	for mode, want := range map[string]string{"confine": "read false\nwrite false\nconnect false\n", "none": "read true\nwrite true\nconnect true\n"} {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), envConfineProbe+"="+mode+"|"+secret+"|"+l.Addr().String())
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("probe: %v: %s", err, out)
		}
		if string(out) != want {
			t.Errorf("%s: the verifier could:\n%s\nwant:\n%s", mode, out, want)
		}
	}
}
