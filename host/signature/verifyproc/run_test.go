package verifyproc

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"

	"github.com/osmhq/osm/host/signature/policy"
)

// TestBrokenVerifiersRefuse: a verifier that crashes, hangs, floods its output, answers garbage, another
// version or nothing at all, or cannot be started, refuses the plugin: Run returns an error and the
// controller's Verifier never accepts. Each verifier here is a shell script standing in for a compromised or
// mismatched osm-plugin-verify; the last one, a well-formed acceptance, shows the others fail for their fault.
func TestBrokenVerifiersRefuse(t *testing.T) {
	dir := t.TempDir()
	script := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("#!/bin/sh\ncat >/dev/null\n"+body+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	tests := []struct {
		name, path, want string
	}{
		{"crashes", script("crash", "echo boom >&2; exit 3"), "failed: exit status 3: boom"},
		{"hangs", script("hang", "exec sleep 60"), "did not answer within"},
		{"floods its output", script("flood", `head -c 200000 /dev/zero`), "more than 65536 bytes"},
		{"answers garbage", script("garbage", "echo not json"), "answer"},
		{"answers unknown fields", script("unknown", `echo '{"version":1,"authority":"a","accepted":true}'`), "unknown field"},
		{"answers another version", script("version", `echo '{"version":2,"authority":"a"}'`), "version 2"},
		{"answers nothing", script("nothing", `echo '{"version":1}'`), "neither an authority nor a refusal"},
		{"is missing", filepath.Join(dir, "absent"), "starting the plugin verifier"},
		{"accepts", script("accept", `echo '{"version":1,"authority":"operator"}'`), ""},
	}
	trust := &policy.Trust{Policy: "osm-system/plugin-policy", Rule: policy.Rule{Name: "r", Mode: policy.ModeWarn}, Key: "k"}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &Runner{Path: tt.path, ProcessTimeout: 500 * time.Millisecond, Log: logr.Discard()}
			resp, err := r.Run(context.Background(), &Request{Version: Version, Trust: *trust})
			if err == nil {
				err = check(resp)
			}
			if tt.want == "" {
				if err != nil {
					t.Fatalf("Run() = %v, want the acceptance", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Run() = %+v, %v; want an error mentioning %q", resp, err, tt.want)
			}
		})
	}
}

// TestRequestBound: a request past MaxRequest is refused before any process starts.
func TestRequestBound(t *testing.T) {
	r := &Runner{Path: "/nonexistent", Log: logr.Discard()}
	req := &Request{Version: Version, Evidence: Evidence{Legacy: []Legacy{{Payload: make([]byte, MaxRequest)}}}}
	if _, err := r.Run(context.Background(), req); err == nil || !strings.Contains(err.Error(), "more than") {
		t.Errorf("Run() of an oversized request = %v, want it refused", err)
	}
}

// TestVerifierBounds: the verifier process runs with the RLIMIT_AS, the nice value and the environment the
// controller gives it, whatever the controller's own: a script reports them as a refusal's detail.
func TestVerifierBounds(t *testing.T) {
	t.Setenv("OSM_TEST_SECRET", "must not reach the verifier")
	p := filepath.Join(t.TempDir(), "report")
	body := `#!/bin/sh
cat >/dev/null
nice=$(cut -d' ' -f19 /proc/$$/stat)
printf '{"version":1,"refusal":{"reason":"report","detail":"as=%s nice=%s env=%s"}}\n' "$(ulimit -v)" "$nice" "$(env | grep -v '^PWD=\|^SHLVL=\|^_=' | sort | tr '\n' ' ')"
`
	if err := os.WriteFile(p, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	r := &Runner{Path: p, AddressSpace: 1 << 30, Log: logr.Discard()}
	resp, err := r.Run(context.Background(), &Request{Version: Version})
	if err != nil || resp.Refusal == nil {
		t.Fatalf("Run() = %+v, %v", resp, err)
	}
	t.Logf("the verifier reports %s", resp.Refusal.Detail)
	want := fmt.Sprintf("as=%d nice=%d env=%s=1 ", (1<<30)>>10, DefaultNice, EnvServe)
	if got := resp.Refusal.Detail; !strings.HasPrefix(got, want[:strings.Index(want, "env=")]) || !strings.Contains(got, EnvServe+"=1") || strings.Contains(got, "OSM_TEST_SECRET") {
		t.Errorf("the verifier ran with %q, want %q (and nothing of the controller's environment)", got, want)
	}
}
