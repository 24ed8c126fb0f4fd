package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// writeKeyPair writes a fresh P-256 key pair as PEM files and returns their paths (private, public).
func writeKeyPair(t *testing.T) (string, string) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	priv, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := x509.MarshalPKIXPublicKey(k.Public())
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	privFile, pubFile := filepath.Join(dir, "osm.key"), filepath.Join(dir, "osm.pub")
	if err := os.WriteFile(privFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: priv}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(pubFile, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}), 0o644); err != nil {
		t.Fatal(err)
	}
	return privFile, pubFile
}

// TestSignVerify signs a plugin, verifies it, and carries it into an air-gapped registry with mirror and with
// save and load: the copies verify with the same key after the source registry is gone.
func TestSignVerify(t *testing.T) {
	src, mirror, airgap := newRegistry(t, nil), newRegistry(t, nil), newRegistry(t, nil)
	ref := pushTemplate(t, src, "osm/template:0.1.0")
	digest := ref[strings.Index(ref, "@")+1:]
	key, pub := writeKeyPair(t)
	_, otherPub := writeKeyPair(t)

	// Unsigned: verify names the missing signature.
	r := osmctl(t, "plugin", "verify", "--plain-http", ref, "--key", pub)
	if r.code == 0 || !strings.Contains(r.stderr, "SignatureMissing") {
		t.Fatalf("verify of an unsigned plugin: %s", r)
	}

	r = mustSucceed(t, osmctl(t, "plugin", "sign", "--plain-http", src.host+"/osm/template:0.1.0", "--key", key))
	if strings.TrimSpace(r.stdout) != ref {
		t.Errorf("sign printed %q, want %s", r.stdout, ref)
	}
	mustSucceed(t, osmctl(t, "plugin", "verify", "--plain-http", ref, "--key", pub))
	r = osmctl(t, "plugin", "verify", "--plain-http", ref, "--key", otherPub)
	if r.code == 0 || !strings.Contains(r.stderr, "SignatureInvalid") {
		t.Errorf("verify with another key: %s", r)
	}
	// Any one of several keys suffices.
	mustSucceed(t, osmctl(t, "plugin", "verify", "--plain-http", ref, "--key", otherPub, "--key", pub))

	mirrored := strings.TrimSpace(mustSucceed(t, osmctl(t, "plugin", "mirror", "--plain-http", ref, mirror.host+"/mirror/template")).stdout)
	bundle := filepath.Join(t.TempDir(), "plugins.tar")
	mustSucceed(t, osmctl(t, "plugin", "save", "--plain-http", src.host+"/osm/template:0.1.0", "-o", bundle))
	src.srv.Close()

	mustSucceed(t, osmctl(t, "plugin", "verify", "--plain-http", mirrored, "--key", pub))
	loaded := strings.TrimSpace(mustSucceed(t, osmctl(t, "plugin", "load", "--plain-http", bundle, "--to", airgap.host)).stdout)
	if want := airgap.host + "/osm/template@" + digest; loaded != want {
		t.Fatalf("load printed %q, want %s", loaded, want)
	}
	mustSucceed(t, osmctl(t, "plugin", "verify", "--plain-http", loaded, "--key", pub))
}

func TestSignRefusesBadKeys(t *testing.T) {
	dir := t.TempDir()
	enc := filepath.Join(dir, "cosign.key")
	if err := os.WriteFile(enc, []byte("-----BEGIN ENCRYPTED SIGSTORE PRIVATE KEY-----\nAAAA\n-----END ENCRYPTED SIGSTORE PRIVATE KEY-----\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r := osmctl(t, "plugin", "sign", "--plain-http", "127.0.0.1:1/osm/x:1", "--key", enc)
	if r.code == 0 || !strings.Contains(r.stderr, "encrypted") {
		t.Errorf("sign with an encrypted key: %s", r)
	}
	r = osmctl(t, "plugin", "verify", "--plain-http", "127.0.0.1:1/osm/x:1")
	if r.code == 0 || !strings.Contains(r.stderr, "give --key") {
		t.Errorf("verify without trust: %s", r)
	}
	r = osmctl(t, "plugin", "verify", "--plain-http", "127.0.0.1:1/osm/x:1", "--trusted-root", enc)
	if r.code == 0 || !strings.Contains(r.stderr, "exactly one of issuer") {
		t.Errorf("verify with a root and no identity: %s", r)
	}
}

// writeNotationChain writes a CA certificate and a code-signing key with its chain (leaf, CA) as PEM files and
// returns their paths (key, chain, CA).
func writeNotationChain(t *testing.T) (string, string, string) {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "osm test CA"}, NotBefore: time.Now().Add(-time.Hour),
		NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, caKey.Public(), caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	leafTmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "release", Organization: []string{"OSM test"}, Country: []string{"US"}, Province: []string{"WA"}},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageCodeSigning}}
	leafDER, err := x509.CreateCertificate(rand.Reader, leafTmpl, ca, key.Public(), caKey)
	if err != nil {
		t.Fatal(err)
	}
	priv, _ := x509.MarshalPKCS8PrivateKey(key)
	dir := t.TempDir()
	files := map[string][]byte{
		"leaf.key":  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: priv}),
		"chain.pem": append(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: leafDER}), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})...),
		"ca.pem":    pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Join(dir, "leaf.key"), filepath.Join(dir, "chain.pem"), filepath.Join(dir, "ca.pem")
}

// TestSignVerifyNotation signs with Notation and verifies against the CA, in the source and in a mirror.
func TestSignVerifyNotation(t *testing.T) {
	src, mirror := newRegistry(t, nil), newRegistry(t, nil)
	ref := pushTemplate(t, src, "osm/template:0.1.0")
	key, chain, ca := writeNotationChain(t)
	_, _, otherCA := writeNotationChain(t)

	mustSucceed(t, osmctl(t, "plugin", "sign", "--plain-http", "--format", "notation", ref, "--key", key, "--certificate", chain))
	mustSucceed(t, osmctl(t, "plugin", "verify", "--plain-http", ref, "--notation-trust-store", ca))
	mustSucceed(t, osmctl(t, "plugin", "verify", "--plain-http", ref, "--notation-trust-store", ca, "--notation-identity", "x509.subject: C=US,ST=WA,O=OSM test,CN=release"))
	for name, args := range map[string][]string{
		"another CA":       {"--notation-trust-store", otherCA},
		"another identity": {"--notation-trust-store", ca, "--notation-identity", "x509.subject: C=US,ST=WA,O=OSM test,CN=someone else"},
	} {
		r := osmctl(t, append([]string{"plugin", "verify", "--plain-http", ref}, args...)...)
		if r.code == 0 || !strings.Contains(r.stderr, "SignatureInvalid") {
			t.Errorf("verify against %s: %s", name, r)
		}
	}
	mirrored := strings.TrimSpace(mustSucceed(t, osmctl(t, "plugin", "mirror", "--plain-http", ref, mirror.host+"/mirror/template")).stdout)
	src.srv.Close()
	mustSucceed(t, osmctl(t, "plugin", "verify", "--plain-http", mirrored, "--notation-trust-store", ca))
}
