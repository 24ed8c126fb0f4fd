package oci

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"testing"
)

type tarWriter struct{ *tar.Writer }

func newTarWriter(w io.Writer) tarWriter { return tarWriter{tar.NewWriter(w)} }

func (t tarWriter) add(name string, b []byte) error {
	if err := t.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(b)), Typeflag: tar.TypeReg}); err != nil {
		return err
	}
	_, err := t.Write(b)
	return err
}

// paxSparseTar is a few KiB of tar holding a PAX (format 1.0) sparse file name that expands to realSize
// bytes when read: one data byte at the end, the rest a hole. archive/tar's writer cannot write sparse files,
// so the extended header block is patched in by hand.
func paxSparseTar(t testing.TB, name string, realSize int64) []byte {
	t.Helper()
	var b bytes.Buffer
	w := tar.NewWriter(&b)
	pax := paxRecord("GNU.sparse.major", "1") + paxRecord("GNU.sparse.minor", "0") +
		paxRecord("GNU.sparse.name", name) + paxRecord("GNU.sparse.realsize", fmt.Sprint(realSize))
	if err := w.WriteHeader(&tar.Header{Name: "PaxHeaders/0", Typeflag: tar.TypeReg, Size: int64(len(pax)), Format: tar.FormatUSTAR}); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write([]byte(pax)); err != nil {
		t.Fatal(err)
	}
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
	// The sparse map (one region: the last byte) fills the first block of the data, the byte follows.
	data := make([]byte, 513)
	copy(data, fmt.Sprintf("1\n%d\n1\n", realSize-1))
	data[512] = 'z'
	if err := w.WriteHeader(&tar.Header{Name: "GNUSparseFile.0/" + name, Typeflag: tar.TypeReg, Size: int64(len(data)), Format: tar.FormatUSTAR}); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func paxRecord(k, v string) string {
	n := len(k) + len(v) + 3
	for {
		s := fmt.Sprintf("%d %s=%s\n", n, k, v)
		if len(s) == n {
			return s
		}
		n = len(s)
	}
}

// headerOnlyTar is one header of the given type and claimed size, with no content behind it.
func headerOnlyTar(t testing.TB, hdr *tar.Header) []byte {
	t.Helper()
	var b bytes.Buffer
	w := tar.NewWriter(&b)
	if err := w.WriteHeader(hdr); err != nil { // written through at once; the content never follows
		t.Fatal(err)
	}
	return b.Bytes()
}
