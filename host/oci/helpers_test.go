package oci

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/pem"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/opencontainers/go-digest"
	specs "github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// testRegistry is an in-process registry.
type testRegistry struct {
	host string // host:port
	ca   []byte // PEM of the server certificate, nil for plain HTTP
	srv  *httptest.Server
}

// newRegistry starts a registry, over TLS if tls is set; wrap, if not nil, sits in front of it (to require
// auth or tamper with responses).
func newRegistry(t *testing.T, tls bool, wrap func(http.Handler) http.Handler) *testRegistry {
	t.Helper()
	h := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	if wrap != nil {
		h = wrap(h)
	}
	r := &testRegistry{srv: httptest.NewUnstartedServer(h)}
	r.srv.Config.ErrorLog = log.New(io.Discard, "", 0) // refused handshakes are expected in some tests
	if tls {
		r.srv.StartTLS()
		r.ca = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: r.srv.Certificate().Raw})
	} else {
		r.srv.Start()
	}
	t.Cleanup(r.srv.Close)
	r.host = strings.TrimPrefix(strings.TrimPrefix(r.srv.URL, "https://"), "http://")
	return r
}

func (r *testRegistry) client(t *testing.T, opts Options) *Client {
	t.Helper()
	if r.ca == nil {
		opts.PlainHTTP = true
	} else if !opts.InsecureSkipTLSVerify && opts.CABundle == nil {
		opts.CABundle = r.ca
	}
	c, err := NewClient(opts)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// fakeModule is module bytes; the OCI layer does not look inside them.
func fakeModule(seed string) []byte {
	return append([]byte("\x00asm\x01\x00\x00\x00"), []byte(seed)...)
}

// pushRaw pushes an arbitrary single-layer manifest, to build artifacts Push would never produce.
func pushRaw(t *testing.T, c *Client, ref, configType, layerType string, layer []byte) string {
	t.Helper()
	ctx := context.Background()
	r, err := parse(ref)
	if err != nil {
		t.Fatal(err)
	}
	repo := c.repository(r)
	config := []byte("{}")
	cdesc := ocispec.Descriptor{MediaType: configType, Digest: digest.FromBytes(config), Size: int64(len(config))}
	ldesc := ocispec.Descriptor{MediaType: layerType, Digest: digest.FromBytes(layer), Size: int64(len(layer))}
	for _, b := range []struct {
		d    ocispec.Descriptor
		data []byte
	}{{cdesc, config}, {ldesc, layer}} {
		if err := pushIfMissing(ctx, repo, b.d, b.data); err != nil {
			t.Fatal(err)
		}
	}
	m, _ := json.Marshal(ocispec.Manifest{Versioned: specs.Versioned{SchemaVersion: 2}, MediaType: ocispec.MediaTypeImageManifest,
		Config: cdesc, Layers: []ocispec.Descriptor{ldesc}})
	mdesc := ocispec.Descriptor{MediaType: ocispec.MediaTypeImageManifest, Digest: digest.FromBytes(m), Size: int64(len(m))}
	if err := repo.PushReference(ctx, mdesc, bytes.NewReader(m), r.Reference); err != nil {
		t.Fatal(err)
	}
	return pinned(r, mdesc.Digest)
}
