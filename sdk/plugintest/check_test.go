package plugintest

import (
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/osmhq/osm/sdk/abi"
)

// recorder is a testing.TB that records failures instead of failing, so the checks themselves can be tested.
type recorder struct {
	testing.TB
	mu     sync.Mutex
	errors []string
}

func (r *recorder) Helper() {}
func (r *recorder) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
}
func (r *recorder) Error(args ...any) { r.Errorf("%s", fmt.Sprint(args...)) }
func (r *recorder) Fatalf(format string, args ...any) {
	r.Errorf(format, args...)
	runtime.Goexit()
}

// failures runs check with a recorder in its own goroutine (Fatalf ends it) and returns what it reported.
func failures(t *testing.T, check func(tb testing.TB)) string {
	rec := &recorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		check(rec)
	}()
	<-done
	return strings.Join(rec.errors, "\n")
}

// TestCheckBootstrapCatchesABootstrapThatNeverFetches replays the trap: a bootstrap stage that keeps
// the (empty) input passes schema checks but never provisions the node; the check must say so.
func TestCheckBootstrapCatchesABootstrapThatNeverFetches(t *testing.T) {
	req := Request("exampleos", "1", abi.UtilityCloudInit, "aws", abi.StageBootstrap)
	got := failures(t, func(tb testing.TB) { CheckBootstrap(tb, req, &abi.NodeConfig{}) })
	if !strings.Contains(got, "no file fetches the provisioning Secret") {
		t.Errorf("CheckBootstrap on an empty bootstrap reported %q", got)
	}
	insecure := &abi.NodeConfig{Files: []abi.File{
		abi.PlainFile("/etc/ca.pem", 0o644, CACert+"\n"),
		abi.PlainFile("/opt/fetch", 0o700, "curl -k -H 'Authorization: Bearer __OSM_SECRET_PROVISIONING_TOKEN__' "+
			"https://api.cluster.example.com:6443/api/v1/namespaces/cloud-init-settings/secrets/workers-kube-system-provisioning-config >/tmp/c\n"),
	}}
	got = failures(t, func(tb testing.TB) { CheckBootstrap(tb, req, insecure) })
	for _, want := range []string{"does not verify TLS with the cluster CA file /etc/ca.pem", "skips TLS verification", "does not hand the configuration to cloud-init"} {
		if !strings.Contains(got, want) {
			t.Errorf("CheckBootstrap on an insecure fetch without handoff lacks %q in %q", want, got)
		}
	}
}

func TestCheckPlaceholdersAndFiles(t *testing.T) {
	req := Request("exampleos", "1", abi.UtilityCloudInit, "aws", abi.StageProvisioning)
	enc := "X19PU01fU0VDUkVUX0JPT1RTVFJBUF9UT0tFTl9f" // the placeholder in base64: the host cannot find it
	cfg := &abi.NodeConfig{Files: []abi.File{abi.PlainFile("/etc/kubeconfig", 0o600, "token: "+enc)}}
	if got := failures(t, func(tb testing.TB) { CheckPlaceholders(tb, req, cfg) }); !strings.Contains(got, "bootstrap token placeholder") {
		t.Errorf("CheckPlaceholders on an encoded placeholder reported %q", got)
	}
	bad := int32(384) // 0600 read as decimal: not octal digits
	cfg = &abi.NodeConfig{Files: []abi.File{{Path: "/etc/a/../b", Permissions: &bad, Content: abi.FileContent{Inline: &abi.FileContentInline{}}}}}
	got := failures(t, func(tb testing.TB) { CheckFiles(tb, cfg) })
	for _, want := range []string{"absolute and clean", "permissions 384 are not octal digits"} {
		if !strings.Contains(got, want) {
			t.Errorf("CheckFiles lacks %q in %q", want, got)
		}
	}
}

type counter struct{ n int }

func (c *counter) Render(req *abi.RenderRequest) (*abi.RenderResponse, error) {
	c.n++
	return &abi.RenderResponse{ABIVersion: abi.Version, Config: abi.NodeConfig{Files: []abi.File{abi.PlainFile("/etc/n", 0o644, fmt.Sprint(c.n))}}}, nil
}

func TestCheckDeterministic(t *testing.T) {
	req := Request("exampleos", "1", abi.UtilityCloudInit, "aws", abi.StageProvisioning)
	if got := failures(t, func(tb testing.TB) { CheckDeterministic(tb, &counter{}, req) }); !strings.Contains(got, "differs from the first") {
		t.Errorf("CheckDeterministic on changing output reported %q", got)
	}
}

// TestCloudInitSchemaRejects proves the validator is real: a document cloud-init refuses must fail the test.
func TestCloudInitSchemaRejects(t *testing.T) {
	got := failures(t, func(tb testing.TB) {
		CloudInitSchema(tb, "bad", []byte("#cloud-config\nwrite_files:\n- path: /a\n  permissions: 644\n  content: x\n"))
	})
	if !strings.Contains(got, "cloud-init schema rejects") {
		t.Errorf("CloudInitSchema accepted integer permissions: %q", got)
	}
}

func TestFormatShowsScriptsAsText(t *testing.T) {
	enable := true
	content := "[Service]\nExecStart=/opt/bin/x\n"
	got := Format(&abi.RenderResponse{Config: abi.NodeConfig{
		Files: []abi.File{abi.PlainFile("/opt/bin/x", 0o755, "#!/bin/sh\necho 'hi'\n"), abi.PlainFile("/etc/n", 0o600, "no newline")},
		Units: []abi.Unit{{Name: "x.service", Enable: &enable, Content: &content}},
	}})
	want := "=== file /opt/bin/x (mode 0755)\n#!/bin/sh\necho 'hi'\n=== file /etc/n (mode 0600)\nno newline\n=== (no newline at end of the content above)\n" +
		"=== unit x.service enable=true\n[Service]\nExecStart=/opt/bin/x\n"
	if got != want {
		t.Errorf("Format =\n%s\nwant\n%s", got, want)
	}
}
