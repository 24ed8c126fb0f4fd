package oci

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/opencontainers/go-digest"
)

// blobCache is a content-addressed store of blobs on disk: <dir>/blobs/<algorithm>/<hex>. Reads verify the
// digest, so a corrupted or tampered file is a miss (and is removed), never wrong content.
type blobCache struct {
	dir  string
	salt []byte
}

func newBlobCache(dir string) (*blobCache, error) {
	for _, sub := range []string{filepath.Join("blobs", "sha256"), "access"} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o700); err != nil {
			return nil, fmt.Errorf("OCI cache %s: %w", dir, err)
		}
	}
	salt, err := loadSalt(dir)
	if err != nil {
		return nil, fmt.Errorf("OCI cache %s: %w", dir, err)
	}
	return &blobCache{dir: dir, salt: salt}, nil
}

func (c *blobCache) path(d digest.Digest) string {
	return filepath.Join(c.dir, "blobs", d.Algorithm().String(), d.Encoded())
}

// get returns the blob with digest d, or ok=false if it is absent or does not match its digest.
func (c *blobCache) get(d digest.Digest) (b []byte, ok bool) {
	if c == nil || d.Validate() != nil {
		return nil, false
	}
	b, err := os.ReadFile(c.path(d))
	if err != nil {
		return nil, false
	}
	if d.Algorithm().FromBytes(b) != d {
		_ = os.Remove(c.path(d))
		return nil, false
	}
	return b, true
}

// put stores a blob whose digest the caller has verified. Writes go through a temporary file and a rename, so
// concurrent readers see the whole blob or nothing.
func (c *blobCache) put(d digest.Digest, b []byte) error {
	if c == nil {
		return nil
	}
	p := c.path(d)
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(p), ".tmp-*")
	if err != nil {
		return err
	}
	defer func() { _ = os.Remove(tmp.Name()) }()
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), p); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	return nil
}

// The cache is shared by every client of one directory, but what a registry serves depends on who asks: an
// artifact pulled with one namespace's pull Secret must not be handed to a profile whose credentials the
// registry would refuse. So the cache also records which credentials were granted which pinned reference
// (<dir>/access/<name>), and a client whose credentials have no record asks the registry first (a HEAD of the
// manifest), whatever blobs are on disk. Records are named by a salted hash, so the directory holds no
// credential and no unsalted hash of one.

// credentialIdentity is the hash of everything that decides which credentials a client sends.
func credentialIdentity(opts Options) []byte {
	h := sha256.New()
	h.Write(opts.DockerConfig)
	h.Write([]byte{0})
	h.Write([]byte(opts.DockerConfigFile))
	return h.Sum(nil)
}

func (c *blobCache) accessPath(cred []byte, ref string) string {
	h := sha256.New()
	h.Write(c.salt)
	h.Write(cred)
	h.Write([]byte(ref))
	return filepath.Join(c.dir, "access", hex.EncodeToString(h.Sum(nil)))
}

// granted reports whether the credentials were granted the pinned reference before.
func (c *blobCache) granted(cred []byte, ref string) bool {
	if c == nil {
		return false
	}
	_, err := os.Stat(c.accessPath(cred, ref))
	return err == nil
}

// grant records that the registry served the pinned reference to the credentials.
func (c *blobCache) grant(cred []byte, ref string) error {
	if c == nil {
		return nil
	}
	return os.WriteFile(c.accessPath(cred, ref), nil, 0o600)
}

// loadSalt reads the cache's salt, creating it on first use.
func loadSalt(dir string) ([]byte, error) {
	p := filepath.Join(dir, "access", "salt")
	if b, err := os.ReadFile(p); err == nil && len(b) == 32 {
		return b, nil
	}
	salt := make([]byte, 32)
	if _, err := rand.Read(salt); err != nil {
		return nil, err
	}
	tmp, err := os.CreateTemp(filepath.Dir(p), ".salt-*")
	if err != nil {
		return nil, err
	}
	defer func() { _ = os.Remove(tmp.Name()) }()
	if _, err := tmp.Write(salt); err != nil {
		tmp.Close()
		return nil, err
	}
	if err := tmp.Close(); err != nil {
		return nil, err
	}
	// Link, not rename: of two processes creating the salt at once, the first one wins and both use it.
	if err := os.Link(tmp.Name(), p); err != nil && !errors.Is(err, fs.ErrExist) {
		return nil, err
	}
	b, err := os.ReadFile(p)
	if err != nil {
		return nil, err
	}
	if len(b) != 32 {
		return nil, fmt.Errorf("OCI cache salt %s is corrupt (%d bytes, want 32): delete it", p, len(b))
	}
	return b, nil
}
