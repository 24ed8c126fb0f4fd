package nodeconfig

import (
	"bytes"
	"compress/gzip"
	"sync"
)

// gzipWriters keeps compressors for reuse: a gzip.Writer at BestCompression allocates ~1 MiB of state, and the
// encoders compress a file or two of every MachineDeployment's user-data (at 500 new MachineDeployments the
// allocation was a visible part of the controller's GC work).
var gzipWriters = sync.Pool{New: func() any {
	zw, _ := gzip.NewWriterLevel(nil, gzip.BestCompression)
	return zw
}}

// Gzip compresses data at the best compression, with an empty header, so the same data always compresses to
// the same bytes (user-data must not change when nothing changed).
func Gzip(data []byte) []byte {
	var buf bytes.Buffer
	zw := gzipWriters.Get().(*gzip.Writer)
	zw.Reset(&buf)
	_, _ = zw.Write(data) // writes to a bytes.Buffer do not fail
	_ = zw.Close()
	zw.Reset(nil)
	gzipWriters.Put(zw)
	return buf.Bytes()
}
