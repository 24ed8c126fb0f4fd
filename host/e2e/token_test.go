//go:build e2e

package e2e

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// backdate re-signs a ServiceAccount token the API server issued with the API server's own signing key, with
// the same claims except that it expired (and was issued) in the past. TokenRequest never grants less than
// ten minutes, so this is how the harness gets an expired credential of exactly the issued shape without
// waiting; OSM_E2E_EXPIRY=1 runs the same case with a token that really aged. The API server still does
// all the checking: signature, issuer, audience, the bound objects and, here, the expiry.
func backdate(t *testing.T, c *cluster, token string, by time.Duration) (string, time.Time) {
	t.Helper()
	header, claims := splitJWT(t, token)
	iat, ok := claims["iat"].(float64)
	exp, ok2 := claims["exp"].(float64)
	if !ok || !ok2 {
		t.Fatalf("token claims lack iat/exp: %v", claims)
	}
	lifetime := time.Duration(exp-iat) * time.Second
	expires := time.Now().Add(-by).Truncate(time.Second)
	issued := expires.Add(-lifetime)
	claims["exp"], claims["iat"], claims["nbf"] = expires.Unix(), issued.Unix(), issued.Unix()

	signingInput := encodeJWTPart(t, header) + "." + encodeJWTPart(t, claims)
	sig := signJWT(t, c.serviceAccountSigningKey(t), header["alg"], []byte(signingInput))
	return signingInput + "." + base64.RawURLEncoding.EncodeToString(sig), expires
}

// serviceAccountSigningKey reads the key envtest generated for the API server's --service-account-signing-key-file.
func (c *cluster) serviceAccountSigningKey(t *testing.T) crypto.Signer {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(c.env.ControlPlane.APIServer.CertDir, "sa-signer.key"))
	if err != nil {
		t.Fatalf("reading the API server's ServiceAccount signing key: %v", err)
	}
	block, _ := pem.Decode(raw)
	if block == nil {
		t.Fatal("the ServiceAccount signing key is not PEM")
	}
	key, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		t.Fatalf("parsing the ServiceAccount signing key: %v", err)
	}
	signer, ok := key.(crypto.Signer)
	if !ok {
		t.Fatalf("the ServiceAccount signing key is a %T", key)
	}
	return signer
}

// signJWT signs with the algorithm the API server used for the original token (JWS, RFC 7518 §3).
func signJWT(t *testing.T, key crypto.Signer, alg any, input []byte) []byte {
	t.Helper()
	digest := sha256.Sum256(input)
	switch k := key.(type) {
	case *ecdsa.PrivateKey:
		if alg != "ES256" {
			t.Fatalf("ECDSA key but token algorithm %v", alg)
		}
		r, s, err := ecdsa.Sign(rand.Reader, k, digest[:])
		if err != nil {
			t.Fatal(err)
		}
		size := (k.Curve.Params().BitSize + 7) / 8
		return append(fixed(r, size), fixed(s, size)...)
	case *rsa.PrivateKey:
		if alg != "RS256" {
			t.Fatalf("RSA key but token algorithm %v", alg)
		}
		sig, err := rsa.SignPKCS1v15(rand.Reader, k, crypto.SHA256, digest[:])
		if err != nil {
			t.Fatal(err)
		}
		return sig
	}
	t.Fatalf("unsupported signing key %T", key)
	return nil
}

func fixed(n *big.Int, size int) []byte {
	return n.FillBytes(make([]byte, size))
}

// jwtExpiry reads the exp claim of a JWT (without verifying it; the API server does that).
func jwtExpiry(t *testing.T, token string) time.Time {
	t.Helper()
	_, claims := splitJWT(t, token)
	exp, ok := claims["exp"].(float64)
	if !ok {
		t.Fatalf("token claims lack exp: %v", claims)
	}
	return time.Unix(int64(exp), 0)
}

// splitJWT decodes a JWT's header and claims.
func splitJWT(t *testing.T, token string) (header, claims map[string]any) {
	t.Helper()
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		t.Fatal("the provisioning token is not a JWT")
	}
	return decodeJWTPart(t, parts[0]), decodeJWTPart(t, parts[1])
}

func decodeJWTPart(t *testing.T, part string) map[string]any {
	t.Helper()
	raw, err := base64.RawURLEncoding.DecodeString(part)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]any{}
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func encodeJWTPart(t *testing.T, v map[string]any) string {
	t.Helper()
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return base64.RawURLEncoding.EncodeToString(raw)
}
