package oci

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"oras.land/oras-go/v2"
	"oras.land/oras-go/v2/content/oci"
)

// Save writes the plugin artifacts refs to w as a tar archive of an OCI image layout, for carrying plugins
// into an air-gapped site. Each artifact is verified like Pull and named in the layout's index by its
// reference: as given when that has a tag (so Load can restore the tag), pinned by digest otherwise.
func (c *Client) Save(ctx context.Context, refs []string, w io.Writer) error {
	dir, err := os.MkdirTemp("", "osm-oci-save-")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	store, err := oci.NewWithContext(ctx, dir)
	if err != nil {
		return err
	}
	for _, ref := range refs {
		a, err := c.Pull(ctx, ref)
		if err != nil {
			return err
		}
		r, _ := parse(a.Reference)
		name := a.Reference
		if given, _ := parse(ref); given.Reference != "" && given.ValidateReferenceAsTag() == nil {
			name = ref
		}
		if _, err := oras.Copy(ctx, c.repository(r), a.ManifestDigest.String(), store, name, oras.DefaultCopyOptions); err != nil {
			return fmt.Errorf("save %s: %w", ref, err)
		}
	}
	return writeTar(dir, w)
}

// Load reads an archive written by Save and pushes every artifact in it to targetRegistry ("host[:port]",
// optionally with a path prefix), keeping each repository path, tag and digest. It returns the pushed
// references, pinned by digest, in the archive's order.
func (c *Client) Load(ctx context.Context, r io.Reader, targetRegistry string) ([]string, error) {
	dir, err := os.MkdirTemp("", "osm-oci-load-")
	if err != nil {
		return nil, err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	if err := readTar(r, dir); err != nil {
		return nil, fmt.Errorf("load: %w", err)
	}
	store, err := oci.NewWithContext(ctx, dir)
	if err != nil {
		return nil, fmt.Errorf("load: not an OCI layout: %w", err)
	}
	var names []string
	if err := store.Tags(ctx, "", func(tags []string) error { names = append(names, tags...); return nil }); err != nil {
		return nil, err
	}
	var pushed []string
	for _, name := range names {
		src, err := parse(name)
		if err != nil {
			return nil, fmt.Errorf("load: archive entry %q: %w", name, err)
		}
		desc, err := store.Resolve(ctx, name)
		if err != nil {
			return nil, err
		}
		dst, err := parse(strings.TrimSuffix(targetRegistry, "/") + "/" + src.Repository + "@" + desc.Digest.String())
		if err != nil {
			return nil, err
		}
		dstRef := desc.Digest.String()
		if src.ValidateReferenceAsTag() == nil {
			dstRef = src.Reference
		}
		if _, err := oras.Copy(ctx, store, name, c.repository(dst), dstRef, oras.DefaultCopyOptions); err != nil {
			return nil, fmt.Errorf("load %s: %w", name, err)
		}
		// Verify what landed, exactly as the controller will pull it.
		if _, err := c.Pull(ctx, dst.String()); err != nil {
			return nil, err
		}
		pushed = append(pushed, pinned(dst, desc.Digest))
	}
	return pushed, nil
}

// writeTar archives dir with sorted entries and zeroed times, so the same artifacts give the same bytes.
func writeTar(dir string, w io.Writer) error {
	var files []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			files = append(files, p)
		}
		return nil
	})
	if err != nil {
		return err
	}
	sort.Strings(files)
	tw := tar.NewWriter(w)
	for _, p := range files {
		rel, _ := filepath.Rel(dir, p)
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		hdr := &tar.Header{Name: filepath.ToSlash(rel), Mode: 0o644, Size: int64(len(b)), Typeflag: tar.TypeReg, Format: tar.FormatPAX}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if _, err := tw.Write(b); err != nil {
			return err
		}
	}
	return tw.Close()
}

// readTar extracts regular files into dir, refusing paths that would leave it.
func readTar(r io.Reader, dir string) error {
	tr := tar.NewReader(r)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if hdr.Typeflag == tar.TypeDir {
			continue
		}
		if hdr.Typeflag != tar.TypeReg {
			return fmt.Errorf("archive entry %q is not a regular file", hdr.Name)
		}
		name := path.Clean(hdr.Name)
		if path.IsAbs(name) || name == ".." || strings.HasPrefix(name, "../") {
			return fmt.Errorf("archive entry %q leaves the archive", hdr.Name)
		}
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			return err
		}
		f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
		if err != nil {
			return err
		}
		_, err = io.Copy(f, io.LimitReader(tr, hdr.Size))
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
	}
}
