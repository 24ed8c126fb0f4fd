package main

import (
	"archive/tar"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestLoadRefusesSparseBundle replays the decompression bomb: a 4 KiB bundle whose one entry is a PAX sparse
// file of 3 GiB. "osmctl plugin load" must refuse it at once, naming the entry, without writing or holding
// the gigabytes, and without pushing anything.
func TestLoadRefusesSparseBundle(t *testing.T) {
	reg := newRegistry(t, nil)
	bundle := filepath.Join(t.TempDir(), "bomb.tar")
	if err := os.WriteFile(bundle, sparseBundle(t, "blobs/sha256/x", 3<<30), 0o600); err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	start := time.Now()
	r := osmctl(t, "plugin", "load", "--plain-http", bundle, "--to", reg.host)
	if r.code == 0 || !strings.Contains(r.stderr, `archive entry "blobs/sha256/x" is a sparse file`) {
		t.Fatalf("load of a sparse bundle: %s", r)
	}
	if took := time.Since(start); took > 30*time.Second {
		t.Errorf("refusing took %s", took)
	}
	if n := reg.requests.Load(); n != 0 {
		t.Errorf("load contacted the registry %d times for a bundle it refuses", n)
	}
	var used int64
	_ = filepath.Walk(tmp, func(_ string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() {
			used += fi.Size()
		}
		return nil
	})
	if used > 1<<20 {
		t.Errorf("load wrote %d bytes to the temporary directory", used)
	}
}

// sparseBundle is a tar holding a PAX (format 1.0) sparse file that expands to realSize bytes when read. The
// standard library cannot write one, so the extended header block is patched in by hand.
func sparseBundle(t *testing.T, name string, realSize int64) []byte {
	t.Helper()
	record := func(k, v string) string {
		for n := len(k) + len(v) + 3; ; {
			s := fmt.Sprintf("%d %s=%s\n", n, k, v)
			if len(s) == n {
				return s
			}
			n = len(s)
		}
	}
	pax := record("GNU.sparse.major", "1") + record("GNU.sparse.minor", "0") + record("GNU.sparse.name", name) + record("GNU.sparse.realsize", fmt.Sprint(realSize))
	var b bytes.Buffer
	w := tar.NewWriter(&b)
	write := func(hdr *tar.Header, data []byte) {
		if err := w.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write(data); err != nil {
			t.Fatal(err)
		}
	}
	write(&tar.Header{Name: "PaxHeaders/0", Typeflag: tar.TypeReg, Size: int64(len(pax)), Format: tar.FormatUSTAR}, []byte(pax))
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	hdr := b.Bytes()[:512]
	hdr[156] = tar.TypeXHeader
	copy(hdr[148:156], "        ")
	sum := 0
	for _, c := range hdr {
		sum += int(c)
	}
	copy(hdr[148:156], fmt.Sprintf("%06o\x00 ", sum))
	data := make([]byte, 513) // the sparse map (one region: the last byte) in the first block, then the byte
	copy(data, fmt.Sprintf("1\n%d\n1\n", realSize-1))
	write(&tar.Header{Name: "GNUSparseFile.0/" + name, Typeflag: tar.TypeReg, Size: int64(len(data)), Format: tar.FormatUSTAR}, data)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}
