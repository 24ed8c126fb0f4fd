package oci

import (
	"archive/tar"
	"io"
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
