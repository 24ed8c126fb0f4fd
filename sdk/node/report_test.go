package node_test

import (
	"crypto/tls"
	"encoding/json"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/osmhq/osm/sdk/abi"
	"github.com/osmhq/osm/sdk/node"
)

// credentialLines are log lines holding credentials in the shapes a failing step prints them, and what must
// remain of each after the allow-list: the secret never.
var credentialLines = []struct{ in, want string }{
	{"E: Unable to locate package jq", "E: Unable to locate package jq"},
	{"E: Version '1.33.2-1.1' for 'kubelet' was not found", "E: Version '1.33.2-1.1' for 'kubelet' was not found"},
	{"curl -H 'Authorization: Bearer abcdef.0123456789abcdef' https://10.0.0.1:6443", "curl -H 'Authorization: <redacted>"},
	{"using token abcdef.0123456789abcdef for the join", "using token abcdef.<redacted> for the join"},
	{"password=hunter2 user=admin", "password= <redacted>"},
	{`{"auths":{"registry.example.com":{"auth":"b3NtOm9zbS1sZWFrLXJlZ2lzdHJ5LXBhc3N3b3Jk"}}}`, "{?auths?:{?registry.example.com?:{?auth?:?<redacted>?}}}"},
	{"pulling https://osm:s3cr3t@registry.example.com/v2/", "pulling https://<redacted>@registry.example.com/v2/"},
	{"aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "aws_secret_access_key = <redacted>"},
	{"sha256 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08 mismatch", "sha256 <redacted> mismatch"},
	{"tab\there \x1b[31mred\x1b[0m \"quoted\" back\\slash ünïcode", "tab here ?[31mred?[0m ?quoted? back?slash ??n??code"},
	{"kubernetesnodesjoinedsuccessfully at 1700000000000000000", "kubernetesnodesjoinedsuccessfully at 1700000000000000000"},
}

// reportScript is osm-report as the kit writes it, with its fixed paths pointed into dir.
func reportScript(t *testing.T, dir, serverURL, caPEM string) string {
	t.Helper()
	cfg := render(t, request(abi.StageProvisioning, func(r *abi.RenderRequest) {
		r.Context.Cluster.ServerURL = serverURL
		r.Context.Cluster.CACert = caPEM
		r.Context.Cluster.ProvisioningSecret = abi.SecretRef{Namespace: "cloud-init-settings", Name: "md-ns-provisioning-config", Key: "cloud-config"}
	}))
	script := file(t, cfg, node.ReportScriptPath)
	if err := os.WriteFile(filepath.Join(dir, "ca.crt"), []byte(caPEM), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "machine-name"), []byte("Worker-1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return strings.NewReplacer(node.CACertPath, filepath.Join(dir, "ca.crt"), node.MachineNamePath, filepath.Join(dir, "machine-name"),
		"/run/osm", dir).Replace(script)
}

// TestReportRedactsByAllowList runs osm_redact, as osm-setup sources it, with every awk at hand (Debian's
// mawk, the gawk of Flatcar and the Red Hat family, busybox's): what leaves the node is the tail of the log,
// each line only of safe characters, without a secret-shaped word or the value after a credential's name.
func TestReportRedactsByAllowList(t *testing.T) {
	dir := t.TempDir()
	script := reportScript(t, dir, "https://127.0.0.1:6443", "ca")
	var lines []string
	for i := range node.ReportLogLines + 5 {
		lines = append(lines, "older line "+strings.Repeat("x", i)) // only the last 20 lines travel
	}
	for _, l := range credentialLines {
		lines = append(lines, l.in)
	}
	lines = append(lines, strings.Repeat("long ", 100))
	logFile := filepath.Join(dir, "setup.log")
	if err := os.WriteFile(logFile, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	awks := 0
	for _, awk := range []string{"mawk", "gawk", "busybox"} {
		path, err := exec.LookPath(awk)
		if err != nil {
			continue
		}
		awks++
		t.Run(awk, func(t *testing.T) {
			bin := t.TempDir()
			wrapper := "#!/bin/sh\nexec " + path + " \"$@\"\n"
			if awk == "busybox" {
				wrapper = "#!/bin/sh\nexec " + path + " awk \"$@\"\n"
			}
			if err := os.WriteFile(filepath.Join(bin, "awk"), []byte(wrapper), 0o700); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command("bash", "-c", script+"\nosm_redact "+logFile)
			cmd.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"))
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("osm_redact: %v", err)
			}
			var got []string
			if err := json.Unmarshal([]byte("["+string(out)+"]"), &got); err != nil {
				t.Fatalf("not a JSON array's items: %v\n%s", err, out)
			}
			if len(got) != node.ReportLogLines {
				t.Fatalf("%d lines, want the last %d:\n%q", len(got), node.ReportLogLines, got)
			}
			tail := got[len(got)-len(credentialLines)-1:]
			for i, l := range credentialLines {
				if tail[i] != l.want {
					t.Errorf("%q\n  became %q\n  want   %q", l.in, tail[i], l.want)
				}
			}
			if last := tail[len(tail)-1]; len(last) != node.ReportLineLength {
				t.Errorf("a long line is cut to %d bytes, got %d", node.ReportLineLength, len(last))
			}
		})
	}
	if awks == 0 {
		t.Fatal("no awk to run osm_redact with")
	}
}

// reportServer records the bootstrap reports it receives, answering as the API server does.
type reportServer struct {
	mu      sync.Mutex
	reports []recordedReport
	status  int
}

type recordedReport struct {
	path, query, contentType, auth string
	body                           map[string]any
}

func (s *reportServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	data, _ := io.ReadAll(r.Body)
	rep := recordedReport{path: r.URL.Path, query: r.URL.RawQuery, contentType: r.Header.Get("Content-Type"), auth: r.Header.Get("Authorization")}
	_ = json.Unmarshal(data, &rep.body)
	s.mu.Lock()
	s.reports = append(s.reports, rep)
	status := s.status
	s.mu.Unlock()
	if status == 0 {
		status = http.StatusOK
	}
	w.WriteHeader(status)
}

func (s *reportServer) take() []recordedReport {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.reports
	s.reports = nil
	return out
}

// TestReportFailure runs osm_report as osm-setup's exit trap calls it, against a TLS server verified with the
// cluster CA: one server-side apply of this machine's entry of its MachineDeployment's report, with its own
// field manager, the step, the exit code and the redacted tail. A refused report turns reporting off: no
// second request, and the caller goes on.
func TestReportFailure(t *testing.T) {
	ca := newTestCA(t)
	rec := &reportServer{}
	srv := httptest.NewUnstartedServer(rec)
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{ca.server}}
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.StartTLS()
	defer srv.Close()
	dir := t.TempDir()
	script := reportScript(t, dir, srv.URL, ca.pem)
	logFile := filepath.Join(dir, "setup.log")
	if err := os.WriteFile(logFile, []byte("Reading package lists...\nE: Unable to locate package jq\nusing token abcdef.0123456789abcdef\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	run := func() {
		t.Helper()
		cmd := exec.Command("bash", "-c", "set -euo pipefail\n"+script+"\nosm_report Failed packages 100 "+logFile+"\necho went on")
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "went on") {
			t.Fatalf("osm_report failed the caller: %v\n%s", err, out)
		}
	}
	run()
	got := rec.take()
	if len(got) != 1 {
		t.Fatalf("%d requests, want 1", len(got))
	}
	r := got[0]
	if r.path != "/apis/operatingsystemmanager.k8c.io/v1alpha1/namespaces/cloud-init-settings/operatingsystemnodereports/md-ns-provisioning-config/status" ||
		r.query != "fieldManager=osm-node-worker-1&force=true" || r.contentType != "application/apply-patch+yaml" || r.auth != "Bearer "+bootstrapTokenPlaceholder(t) {
		t.Errorf("request %+v", r)
	}
	entry, _ := r.body["status"].(map[string]any)["machines"].(map[string]any)["worker-1"].(map[string]any)
	if entry["phase"] != "Failed" || entry["step"] != "packages" || entry["exitCode"] != float64(100) {
		t.Errorf("entry %v", entry)
	}
	tail, _ := json.Marshal(entry["logTail"])
	if want := `["Reading package lists...","E: Unable to locate package jq","using token abcdef.\u003credacted\u003e"]`; string(tail) != want {
		t.Errorf("logTail %s, want %s", tail, want)
	}

	rec.status = http.StatusForbidden
	run()
	run()
	if n := len(rec.take()); n != 1 {
		t.Errorf("after a refusal: %d more requests, want 1 (then reporting is off)", n)
	}
}

func bootstrapTokenPlaceholder(t *testing.T) string {
	t.Helper()
	return request(abi.StageProvisioning).Context.Secrets.BootstrapToken
}

// TestBootstrapReportsFetched: osm-bootstrap reports Fetched with the provisioning token, once the fetch
// succeeded, and a refused report does not stop it.
func TestBootstrapReportsFetched(t *testing.T) {
	ca := newTestCA(t)
	const token = "abcdef.0123456789abcdef"
	var mu sync.Mutex
	var bodies []string
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPatch {
			data, _ := io.ReadAll(r.Body)
			mu.Lock()
			bodies = append(bodies, r.URL.Path+"?"+r.URL.RawQuery+" "+r.Header.Get("Authorization")+" "+string(data))
			mu.Unlock()
			http.Error(w, "forbidden", http.StatusForbidden)
			return
		}
		_, _ = w.Write([]byte(secretJSON("cloud-config", "#cloud-config\n")))
	}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{ca.server}}
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.StartTLS()
	defer srv.Close()
	got, stderr, err := runBootstrap(t, srv.URL, ca.pem, token)
	if err != nil || got != "#cloud-config\n" {
		t.Fatalf("bootstrap: %v %q\n%s", err, got, stderr)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(bodies) != 1 || !strings.Contains(bodies[0], "/operatingsystemnodereports/md-ns-provisioning-config/status?fieldManager=osm-node-") ||
		!strings.Contains(bodies[0], "Bearer "+token) || !strings.Contains(bodies[0], `:{"phase":"Fetched"}}}}`) {
		t.Errorf("reports: %q", bodies)
	}
}

// TestEveryExitTrapKeepsTheFailureReport: bash keeps one EXIT trap per shell, so a part of osm-setup that set
// its own after the report's would silence every failure after it (a missing package went unreported on a
// node of the e2e that way). Every EXIT trap osm-setup sets must end in osm_on_exit.
func TestEveryExitTrapKeepsTheFailureReport(t *testing.T) {
	script := file(t, render(t, request(abi.StageProvisioning)), node.SetupScriptPath)
	traps := 0
	for _, line := range strings.Split(script, "\n") {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "trap ") || !strings.HasSuffix(line, " EXIT") {
			continue
		}
		traps++
		if !strings.Contains(line, "osm_on_exit") {
			t.Errorf("osm-setup sets an EXIT trap that drops the failure report: %s", line)
		}
	}
	if traps < 2 {
		t.Errorf("osm-setup sets %d EXIT traps, want the report's and the downloads' (the request renders both)", traps)
	}
}
