package node_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/osmhq/osm/sdk/abi"
	"github.com/osmhq/osm/sdk/guest"
	"github.com/osmhq/osm/sdk/node"
	"github.com/osmhq/osm/sdk/node/apt"
)

// testCA is a CA and a server certificate for 127.0.0.1 signed by it.
type testCA struct {
	pem    string
	server tls.Certificate
}

func newTestCA(t *testing.T) testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "kubernetes"}, NotBefore: time.Now().Add(-time.Hour),
		NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	srvKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	srvTmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "kube-apiserver"}, NotBefore: time.Now().Add(-time.Hour),
		NotAfter: time.Now().Add(time.Hour), IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		KeyUsage: x509.KeyUsageDigitalSignature}
	srvDER, err := x509.CreateCertificate(rand.Reader, srvTmpl, ca, &srvKey.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return testCA{
		pem:    string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})),
		server: tls.Certificate{Certificate: [][]byte{srvDER}, PrivateKey: srvKey},
	}
}

// secretJSON is a Secret as the API server returns it to curl: pretty-printed, the key among managed fields.
func secretJSON(key, value string) string {
	return fmt.Sprintf(`{
  "kind": "Secret",
  "apiVersion": "v1",
  "metadata": {
    "name": "md-ns-provisioning-config",
    "namespace": "cloud-init-settings",
    "managedFields": [{"fieldsV1": {"f:data": {"f:%s": {}}}}]
  },
  "immutable": true,
  "data": {
    "%s": "%s"
  },
  "type": "Opaque"
}
`, key, key, base64.StdEncoding.EncodeToString([]byte(value)))
}

// runBootstrap renders the bootstrap for serverURL and caPEM, substitutes the token as the host does, points the
// script's fixed paths into a temporary directory and runs it up to the fetch; the handoff just copies the
// fetched configuration. It returns the fetched configuration, the script's stderr and its error.
func runBootstrap(t *testing.T, serverURL, caPEM, token string) (string, string, error) {
	t.Helper()
	os := apt.OS()
	os.Name, os.PluginVersion, os.Versions, os.CloudProviders = "testos", "v0.1.0", []string{"1"}, []string{"aws"}
	os.Handoff = func(_ *node.Request, s *node.Script) { s.Line(`cp $cfg "$OSM_TEST_OUT"`) }
	req := request(abi.StageBootstrap, func(r *abi.RenderRequest) {
		r.Context.Cluster.ServerURL = serverURL
		r.Context.Cluster.CACert = caPEM
		r.Context.Cluster.ProvisioningSecret = abi.SecretRef{Namespace: "cloud-init-settings", Name: "md-ns-provisioning-config", Key: "cloud-config"}
	})
	resp, err := guest.Call(node.New(os), req)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	ca := filepath.Join(dir, "ca.crt")
	if err := writeFile(ca, resp.Config.File(node.CACertPath).Content.Inline.Data); err != nil {
		t.Fatal(err)
	}
	script := resp.Config.File(node.BootstrapScriptPath).Content.Inline.Data
	script = strings.NewReplacer(node.CACertPath, ca, "/run/osm", dir, "/var/lib/osm", dir,
		req.Context.Secrets.ProvisioningToken, token).Replace(script)
	out := filepath.Join(dir, "fetched")
	cmd := exec.Command("bash", "-c", script)
	cmd.Env = append(cmd.Environ(), "OSM_TEST_OUT="+out)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { done <- cmd.Wait() }()
	select {
	case err = <-done:
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatalf("bootstrap still running after 30s; stderr:\n%s", stderr.String())
	}
	fetched, _ := readFile(out)
	return fetched, stderr.String(), err
}

// TestBootstrapFetchesOverVerifiedTLS runs the generated bootstrap script with the real curl, grep, sed and
// base64 against a TLS server that behaves like the API server.
func TestBootstrapFetchesOverVerifiedTLS(t *testing.T) {
	for _, tool := range []string{"bash", "curl", "base64"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is needed to run the bootstrap script as a node would: %v", tool, err)
		}
	}
	ca := newTestCA(t)
	const token = "abcdef.0123456789abcdef"
	const provisioning = "#cloud-config\nwrite_files:\n- path: /etc/x\n  content: \"a \\\"quoted\\\" value\"\n"
	var calls atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := calls.Add(1)
		switch {
		case r.URL.Path != "/api/v1/namespaces/cloud-init-settings/secrets/md-ns-provisioning-config":
			http.NotFound(w, r)
		case r.Header.Get("Authorization") != "Bearer "+token:
			http.Error(w, `{"kind":"Status","code":401}`, http.StatusUnauthorized)
		case n == 1:
			// The first answer fails as an API server that is still starting does.
			http.Error(w, "starting", http.StatusServiceUnavailable)
		default:
			_, _ = w.Write([]byte(secretJSON("cloud-config", provisioning)))
		}
	}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{ca.server}}
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshakes are expected
	srv.StartTLS()
	defer srv.Close()

	t.Run("fetches after a retry", func(t *testing.T) {
		got, stderr, err := runBootstrap(t, srv.URL, ca.pem, token)
		if err != nil {
			t.Fatalf("bootstrap failed: %v\n%s", err, stderr)
		}
		if got != provisioning {
			t.Errorf("fetched %q, want %q", got, provisioning)
		}
		if !strings.Contains(stderr, "HTTP 503; retrying") {
			t.Errorf("no retry logged:\n%s", stderr)
		}
	})
	t.Run("refused token fails loudly", func(t *testing.T) {
		_, stderr, err := runBootstrap(t, srv.URL, ca.pem, "wrong.token")
		if err == nil || !strings.Contains(stderr, "token refused (HTTP 401)") {
			t.Fatalf("err = %v, stderr:\n%s", err, stderr)
		}
	})
	t.Run("certificate of another CA fails loudly", func(t *testing.T) {
		_, stderr, err := runBootstrap(t, srv.URL, newTestCA(t).pem, token)
		if err == nil || !strings.Contains(stderr, "TLS verification with") {
			t.Fatalf("err = %v, stderr:\n%s", err, stderr)
		}
	})
}

func writeFile(path, data string) error { return os.WriteFile(path, []byte(data), 0o600) }

func readFile(path string) (string, error) {
	b, err := os.ReadFile(path)
	return string(b), err
}
