package app

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net/http"
	"path/filepath"
	"testing"
	"time"
)

// TestCertFilesWaitAndReload: without a key pair the server answers handshakes with an error instead of
// failing its start; a pair that appears is served, and a replaced pair is served from the next handshake.
func TestCertFilesWaitAndReload(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "certs")
	files := &certFiles{dir: dir}
	if _, err := files.current(); !errors.Is(err, errNoServingCert) {
		t.Fatalf("no files: %v, want errNoServingCert", err)
	}
	// As the webhook server listens (newWebhookServer): GetCertificate only.
	l, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{GetCertificate: files.GetCertificate, MinVersion: tls.VersionTLS12})
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.NotFoundHandler(), ReadHeaderTimeout: time.Second}
	go func() { _ = srv.Serve(l) }()
	defer srv.Close()
	addr := l.Addr().String()
	if err := serves(addr, "", nil); err == nil {
		t.Fatal("a handshake succeeded without a certificate")
	}

	for i, host := range []string{"first.example", "second.example"} {
		pair := newTestPair(t, host)
		changed, err := files.write(pair)
		if err != nil || !changed {
			t.Fatalf("write %d: changed %v, %v", i, changed, err)
		}
		if err := serves(addr, host, pair[caFile]); err != nil {
			t.Fatalf("pair %d not served: %v", i, err)
		}
		ca, err := files.caBundle()
		if err != nil || string(ca) != string(pair[caFile]) {
			t.Fatalf("caBundle %d: %v", i, err)
		}
		if changed, err := files.write(pair); err != nil || changed {
			t.Errorf("rewriting the same pair: changed %v, %v", changed, err)
		}
	}
}

// newTestPair returns a self-signed certificate for host, which is its own CA, and its key.
func newTestPair(t *testing.T, host string) map[string][]byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: host}, DNSNames: []string{host},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	crt := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	return map[string][]byte{certFile: crt, caFile: crt, keyFile: pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})}
}
