package nodeconfig

import (
	"bytes"
	"compress/gzip"
	"container/list"
	"crypto/sha256"
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
// the same bytes (user-data must not change when nothing changed). The result may be shared with other
// callers: it must not be modified.
func Gzip(data []byte) []byte {
	key := sha256.Sum256(data)
	if out, ok := compressed.get(key); ok {
		return out
	}
	out := deflate(data)
	compressed.add(key, out)
	return out
}

func deflate(data []byte) []byte {
	var buf bytes.Buffer
	zw := gzipWriters.Get().(*gzip.Writer)
	zw.Reset(&buf)
	_, _ = zw.Write(data) // writes to a bytes.Buffer do not fail
	_ = zw.Close()
	zw.Reset(nil)
	gzipWriters.Put(zw)
	return buf.Bytes()
}

// compressed remembers what Gzip returned for recent contents. Most files of a MachineDeployment's user-data
// are the same for every MachineDeployment of its profile, and compressing each of them again at the best
// compression was 6% of the controller's CPU at 500 new MachineDeployments over five OSes (CPU profile of
// `make bench-controller`, 2026-11-28); hashing them costs a fraction of that. Contents of one
// MachineDeployment alone (its bootstrap kubeconfig) pass through and age out. 256 entries of a few KiB hold
// every shared file of the default profiles several times over.
var compressed = newGzipMemo(256)

// gzipMemo is a least-recently-used map from a content's SHA-256 to its compressed bytes.
type gzipMemo struct {
	mu      sync.Mutex
	max     int
	order   *list.List // of *gzipEntry, most recent first
	entries map[[sha256.Size]byte]*list.Element
}

type gzipEntry struct {
	key [sha256.Size]byte
	out []byte
}

func newGzipMemo(max int) *gzipMemo {
	return &gzipMemo{max: max, order: list.New(), entries: map[[sha256.Size]byte]*list.Element{}}
}

func (m *gzipMemo) get(key [sha256.Size]byte) ([]byte, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.entries[key]
	if !ok {
		return nil, false
	}
	m.order.MoveToFront(e)
	return e.Value.(*gzipEntry).out, true
}

func (m *gzipMemo) add(key [sha256.Size]byte, out []byte) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.entries[key]; ok {
		return
	}
	m.entries[key] = m.order.PushFront(&gzipEntry{key: key, out: out})
	if m.order.Len() > m.max {
		oldest := m.order.Back()
		m.order.Remove(oldest)
		delete(m.entries, oldest.Value.(*gzipEntry).key)
	}
}
