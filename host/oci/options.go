package oci

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"time"

	"oras.land/oras-go/v2/registry"
	"oras.land/oras-go/v2/registry/remote"
	"oras.land/oras-go/v2/registry/remote/auth"
	"oras.land/oras-go/v2/registry/remote/credentials"
	"oras.land/oras-go/v2/registry/remote/retry"
)

// DefaultMaxModuleSize bounds a pulled module. Go plugins are 2–4 MB; the bound keeps a hostile registry from
// filling memory or the cache, and a module this size still compiles within the runtime's limits.
const DefaultMaxModuleSize = 32 << 20

// maxManifestSize bounds a manifest, which for a wasm artifact is well under a kilobyte.
const maxManifestSize = 4 << 20

// Options configure a Client.
type Options struct {
	// DockerConfig is the content of a docker config.json, e.g. the .dockerconfigjson key of a
	// kubernetes.io/dockerconfigjson Secret. Registries it has no entry for are accessed anonymously.
	DockerConfig []byte
	// DockerConfigFile is the path of a docker config.json (see DefaultDockerConfigFile), read like the docker
	// CLI reads it, credential helpers included. It is consulted for registries DockerConfig has no entry
	// for; a missing file has no credentials.
	DockerConfigFile string
	// CABundle is PEM certificates trusted in addition to the system roots.
	CABundle []byte
	// InsecureSkipTLSVerify disables certificate verification. For tests and labs only.
	InsecureSkipTLSVerify bool
	// PlainHTTP talks HTTP instead of HTTPS to every registry.
	PlainHTTP bool
	// CacheDir, if set, keeps pulled manifests and modules on disk by digest.
	CacheDir string
	// MaxModuleSize bounds a pulled module. Default DefaultMaxModuleSize.
	MaxModuleSize int64
	// PullTimeout bounds a whole Pull (every request and every byte of every body, retries included), so a
	// registry that answers one byte a second cannot hold the caller for longer. Zero means only the caller's
	// context bounds it.
	PullTimeout time.Duration
	// UserAgent is sent to registries. Default "osm".
	UserAgent string
	// Transport replaces the HTTP transport built from the TLS options (tests, proxies).
	Transport http.RoundTripper
}

// Client talks to OCI registries. It is safe for concurrent use.
type Client struct {
	opts  Options
	http  *auth.Client
	cache *blobCache
	// credID identifies the credentials this client pulls with (see credentialIdentity); the cache serves an
	// artifact without asking the registry only to the credentials that were granted it before.
	credID []byte
}

// NewClient checks the options and builds the HTTP client once, so every operation shares connections and
// the token cache.
func NewClient(opts Options) (*Client, error) {
	if opts.MaxModuleSize <= 0 {
		opts.MaxModuleSize = DefaultMaxModuleSize
	}
	if opts.UserAgent == "" {
		opts.UserAgent = "osm"
	}
	transport := opts.Transport
	if transport == nil {
		t, err := newTransport(opts)
		if err != nil {
			return nil, err
		}
		transport = t
	}
	store := credentials.NewMemoryStore()
	if len(opts.DockerConfig) > 0 {
		var err error
		if store, err = credentials.NewMemoryStoreFromDockerConfig(opts.DockerConfig); err != nil {
			return nil, fmt.Errorf("registry credentials: %w", err)
		}
	}
	if opts.DockerConfigFile != "" {
		file, err := dockerConfigStore(opts.DockerConfigFile)
		if err != nil {
			return nil, err
		}
		store = credentials.NewStoreWithFallbacks(store, file)
	}
	c := &Client{
		opts:   opts,
		credID: credentialIdentity(opts),
		http: &auth.Client{
			Client:     &http.Client{Transport: retry.NewTransport(transport), Timeout: 5 * time.Minute},
			Cache:      auth.NewCache(),
			Credential: credentials.Credential(store),
			Header:     http.Header{"User-Agent": {opts.UserAgent}},
		},
	}
	if opts.CacheDir != "" {
		cache, err := newBlobCache(opts.CacheDir)
		if err != nil {
			return nil, err
		}
		c.cache = cache
	}
	return c, nil
}

func newTransport(opts Options) (*http.Transport, error) {
	t := http.DefaultTransport.(*http.Transport).Clone()
	tlsConfig := &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: opts.InsecureSkipTLSVerify} //nolint:gosec // explicit opt-in
	if len(opts.CABundle) > 0 {
		pool, err := x509.SystemCertPool()
		if err != nil || pool == nil {
			pool = x509.NewCertPool()
		}
		if !pool.AppendCertsFromPEM(opts.CABundle) {
			return nil, errors.New("CA bundle contains no PEM certificate")
		}
		tlsConfig.RootCAs = pool
	}
	t.TLSClientConfig = tlsConfig
	return t, nil
}

// repository returns a client for the reference's repository.
func (c *Client) repository(ref registry.Reference) *remote.Repository {
	return &remote.Repository{Client: c.http, Reference: ref, PlainHTTP: c.opts.PlainHTTP}
}

// parse parses an image reference ("registry/repo:tag", "registry/repo@sha256:...").
func parse(ref string) (registry.Reference, error) {
	r, err := registry.ParseReference(ref)
	if err != nil {
		return r, fmt.Errorf("invalid image reference %q: %w", ref, err)
	}
	return r, nil
}
