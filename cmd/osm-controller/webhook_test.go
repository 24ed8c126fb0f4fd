package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-logr/logr/funcr"

	"github.com/osmhq/osm/host/app"
)

// TestWebhookDecision: the controller serves its webhooks when asked to or when the serving certificate is
// there, and says which at start.
func TestWebhookDecision(t *testing.T) {
	withCert := t.TempDir()
	for _, name := range []string{"tls.crt", "tls.key"} {
		if err := os.WriteFile(filepath.Join(withCert, name), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	onlyCrt := t.TempDir()
	if err := os.WriteFile(filepath.Join(onlyCrt, "tls.crt"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	empty := t.TempDir()
	for _, tc := range []struct {
		name, mode, certs, dir string
		port                   int
		wantPort               int
		wantCerts              app.WebhookCertMode
		wantLog                string
		wantErr                string
	}{
		{"auto with a certificate (cert-manager's, mounted)", webhooksAuto, "", withCert, 9443, 9443, app.WebhookCertsDir, "admission webhooks on", ""},
		{"auto without a certificate (upstream's controller Deployment)", webhooksAuto, "", empty, 9443, 0, "", "admission webhooks off: no tls.crt and tls.key", ""},
		{"auto with half a certificate", webhooksAuto, "", onlyCrt, 9443, 0, "", "admission webhooks off: no tls.crt and tls.key", ""},
		{"auto with a missing directory", webhooksAuto, "", filepath.Join(empty, "nope"), 9443, 0, "", "admission webhooks off", ""},
		{"forced on without a certificate: the controller's own", "true", "", empty, 9443, 9443, app.WebhookCertsSelf, "admission webhooks on", ""},
		{"forced on, cert-manager's certificate", "true", "dir", empty, 9443, 9443, app.WebhookCertsDir, "admission webhooks on", ""},
		{"forced off", "false", "", withCert, 9443, 0, "", "admission webhooks off: -webhooks=false", ""},
		{"port 0", webhooksAuto, "", withCert, 0, 0, "", "admission webhooks off: -webhook-port=0", ""},
		{"bad mode", "maybe", "", withCert, 9443, 0, "", "", `-webhooks: "maybe" is not auto, true or false`},
		{"bad certificate source", "true", "vault", withCert, 9443, 0, "", "", `-webhook-certs: "vault" is not self or dir`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var lines []string
			log := funcr.New(func(prefix, args string) { lines = append(lines, args) }, funcr.Options{})
			f := &flags{webhooks: tc.mode, webhookCerts: tc.certs, webhookPort: tc.port, webhookCertDir: tc.dir}
			opts, serving, err := f.webhookServer(log)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if opts.Port != tc.wantPort || serving.Certs != tc.wantCerts {
				t.Errorf("port %d, certificates %q, want %d, %q", opts.Port, serving.Certs, tc.wantPort, tc.wantCerts)
			}
			if len(lines) != 1 || !strings.Contains(lines[0], tc.wantLog) || !strings.Contains(lines[0], tc.dir) {
				t.Errorf("log %q, want one line with %q and the directory", lines, tc.wantLog)
			}
		})
	}
}

func TestWebhookMode(t *testing.T) {
	for _, tc := range []struct {
		argv []string
		args []string
		ok   bool
	}{
		{[]string{"/usr/local/bin/webhook", "-namespace=kube-system"}, []string{"-namespace=kube-system"}, true},
		{[]string{"osm-controller", "webhook", "-cert-dir=/x"}, []string{"-cert-dir=/x"}, true},
		{[]string{"osm-controller", "-namespace=kube-system"}, nil, false},
		{[]string{"osm-controller", "-namespace", "webhook"}, nil, false},
	} {
		args, ok := webhookMode(tc.argv)
		if ok != tc.ok || strings.Join(args, " ") != strings.Join(tc.args, " ") {
			t.Errorf("%q: %q %v, want %q %v", tc.argv, args, ok, tc.args, tc.ok)
		}
	}
}

// TestPluginCacheDirFallback: an unwritable default cache directory does not stop the start (upstream's
// Deployments mount no volume for it); an explicit one is used as given, so a wrong one fails loudly.
func TestPluginCacheDirFallback(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	unwritable := filepath.Join(file, "cache") // below a regular file: not creatable, even for root
	good := filepath.Join(t.TempDir(), "cache")

	var lines []string
	log := funcr.New(func(_, args string) { lines = append(lines, args) }, funcr.Options{})
	if got := (&cacheDirFlag{dir: good}).usable(log); got != good || len(lines) != 0 {
		t.Errorf("writable default: %q, logs %q", got, lines)
	}
	explicit := &cacheDirFlag{}
	if err := explicit.Set(unwritable); err != nil {
		t.Fatal(err)
	}
	if got := explicit.usable(log); got != unwritable {
		t.Errorf("explicit directory replaced by %q", got)
	}
	got := (&cacheDirFlag{dir: unwritable}).usable(log)
	if got == unwritable {
		t.Fatal("unwritable default directory kept")
	}
	if got != "" && writableDir(got) != nil {
		t.Errorf("fallback %q is not writable", got)
	}
	if len(lines) != 1 || !strings.Contains(lines[0], "plugin cache") || !strings.Contains(lines[0], unwritable) {
		t.Errorf("want one log line naming the default directory, got %q", lines)
	}
}
