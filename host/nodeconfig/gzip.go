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

// compressed remembers what Gzip returned for recent contents. Ignition compresses every file of 512 bytes
// or more, and most of them are the same for every MachineDeployment of a profile: compressing them again at
// the best compression was about 5% of the controller's CPU at 500 new MachineDeployments over five OSes
// (ignition.Encode, 0.13 of 2.5 s in 10 s of `make bench-controller` CPU profile, 2026-11-28), and is gone
// from the profile with the memo. Contents of one MachineDeployment alone pass through and age out: the
// gzipped bootstrap script of cloud-init carries the MachineDeployment's token, so it is compressed every
// time (0.11 s in the same profile). 256 entries hold every shared file of the default profiles.
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
