package oci

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/opencontainers/go-digest"
)

// blobCache is a content-addressed store of blobs on disk: <dir>/blobs/<algorithm>/<hex>. Reads verify the
// digest, so a corrupted or tampered file is a miss (and is removed), never wrong content.
type blobCache struct{ dir string }

func newBlobCache(dir string) (*blobCache, error) {
	if err := os.MkdirAll(filepath.Join(dir, "blobs", "sha256"), 0o700); err != nil {
		return nil, fmt.Errorf("OCI cache %s: %w", dir, err)
	}
	return &blobCache{dir: dir}, nil
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
