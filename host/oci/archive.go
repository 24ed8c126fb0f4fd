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
	"testing/fstest"

	"oras.land/oras-go/v2"
	"oras.land/oras-go/v2/content/oci"
	"oras.land/oras-go/v2/errdef"
)

// Save writes the plugin artifacts refs to w as a tar archive of an OCI image layout, for carrying plugins
// into an air-gapped site. Each artifact is verified like Pull and named in the layout's index by its
// reference: as given when that has a tag (so Load can restore the tag), pinned by digest otherwise. The
// artifacts' referrers (their signatures) are saved with them, and Load pushes them back beside them.
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
		if _, err := oras.ExtendedCopy(ctx, c.repository(r), a.ManifestDigest.String(), store, name, withReferrers); err != nil {
			return fmt.Errorf("save %s: %w", ref, err)
		}
		// cosign's older layout: the signatures' own tag, named in the layout so that Load restores it.
		sigTag := LegacySignatureTag(a.ManifestDigest)
		if _, err := c.repository(r).Resolve(ctx, sigTag); err == nil {
			if _, err := oras.Copy(ctx, c.repository(r), sigTag, store, r.Registry+"/"+r.Repository+":"+sigTag, oras.DefaultCopyOptions); err != nil {
				return fmt.Errorf("save the cosign signatures of %s: %w", ref, err)
			}
		} else if !errors.Is(err, errdef.ErrNotFound) {
			return fmt.Errorf("save the cosign signatures of %s: %w", ref, err)
		}
	}
	return writeTar(dir, w)
}

// Load reads an archive written by Save (into memory, within the limits of readTar) and pushes every artifact in it to targetRegistry ("host[:port]",
// optionally with a path prefix), keeping each repository path, tag and digest. It returns the pushed
// references, pinned by digest, in the archive's order.
func (c *Client) Load(ctx context.Context, r io.Reader, targetRegistry string) ([]string, error) {
	files, err := readTar(r, c.archiveLimits())
	if err != nil {
		return nil, fmt.Errorf("load: %w", err)
	}
	store, err := oci.NewFromFS(ctx, files)
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
		if _, err := oras.ExtendedCopy(ctx, store, name, c.repository(dst), dstRef, withReferrers); err != nil {
			return nil, fmt.Errorf("load %s: %w", name, err)
		}
		if isLegacySignatureTag(src.Reference) {
			continue // signatures, not a plugin: verified by whoever verifies the plugin
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

// Limits of an archive Load reads. An archive comes from elsewhere (it is carried across an air gap), so
// everything it can make Load consume is bounded before it is read: a 10 KiB tar can claim an entry of
// terabytes, or describe a sparse file that expands to gigabytes of zeros.
type archiveLimits struct {
	// entry bounds each file: the module size limit (a module is the largest blob of a layout).
	entry int64
	// total bounds the sum of the entries' sizes, which Load holds in memory.
	total int64
	// entries bounds the number of files; a layout holds three blobs per plugin and two index files.
	entries int
}

func (c *Client) archiveLimits() archiveLimits {
	return archiveLimits{entry: c.opts.MaxModuleSize, total: 512 << 20, entries: 4096}
}

// readTar reads an archive of an OCI layout into memory. Only regular files and directories are accepted,
// within the limits; sparse files, links, devices
// and paths leaving the archive are refused before any content is read.
func readTar(r io.Reader, limits archiveLimits) (fstest.MapFS, error) {
	tr := tar.NewReader(r)
	files := fstest.MapFS{}
	var total int64
	for n := 0; ; n++ {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files, nil
		}
		if err != nil {
			return nil, fmt.Errorf("reading the archive: %w", err)
		}
		if n >= limits.entries {
			return nil, fmt.Errorf("archive has more than %d entries", limits.entries)
		}
		name, err := entryName(hdr, limits.entry)
		if err != nil || name == "" {
			return nil, err
		}
		if total += hdr.Size; total > limits.total {
			return nil, fmt.Errorf("archive entries add up to more than %d bytes", limits.total)
		}
		// Read through a limit, not into a buffer of the claimed size: a header may lie about a size the
		// archive does not have.
		data, err := io.ReadAll(io.LimitReader(tr, hdr.Size))
		if err != nil {
			return nil, fmt.Errorf("archive entry %q: %w", hdr.Name, err)
		}
		if int64(len(data)) != hdr.Size {
			return nil, fmt.Errorf("archive entry %q is truncated: %d of %d bytes", hdr.Name, len(data), hdr.Size)
		}
		files[name] = &fstest.MapFile{Data: data, Mode: 0o444}
	}
}

// entryName checks an entry's header and returns its clean path, or "" for a directory (which needs no
// entry of its own in memory).
func entryName(hdr *tar.Header, maxEntry int64) (string, error) {
	switch hdr.Typeflag {
	case tar.TypeDir:
		return "", nil
	case tar.TypeReg:
	case tar.TypeGNUSparse:
		return "", fmt.Errorf("archive entry %q is a sparse file; a plugin archive has none", hdr.Name)
	default:
		return "", fmt.Errorf("archive entry %q is not a regular file (type %q); links and special files are refused", hdr.Name, hdr.Typeflag)
	}
	for k := range hdr.PAXRecords {
		if strings.HasPrefix(k, "GNU.sparse.") {
			return "", fmt.Errorf("archive entry %q is a sparse file; a plugin archive has none", hdr.Name)
		}
	}
	if hdr.Size < 0 || hdr.Size > maxEntry {
		return "", fmt.Errorf("archive entry %q claims %d bytes, more than the %d allowed", hdr.Name, hdr.Size, maxEntry)
	}
	name := path.Clean(hdr.Name)
	if path.IsAbs(name) || name == ".." || strings.HasPrefix(name, "../") || !fs.ValidPath(name) || name == "." {
		return "", fmt.Errorf("archive entry %q leaves the archive", hdr.Name)
	}
	return name, nil
}
