package plugin

import (
	"context"
	"io/fs"
	"strings"
	"sync"
	"testing"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/osmhq/osm/plugins"
)

// recordingFS is the embedded plugins, recording every way a module's bytes are had: in place through
// Mapped (and whether they were released), or copied through ReadFile or Open and Read.
type recordingFS struct {
	plugins.BuiltinFS
	mu                     sync.Mutex
	mapped, released, read map[string]int
}

func newRecordingFS(t *testing.T) *recordingFS {
	t.Helper()
	b, ok := plugins.Builtin().(plugins.BuiltinFS)
	if !ok {
		t.Fatalf("plugins.Builtin() is a %T, not a plugins.BuiltinFS", plugins.Builtin())
	}
	return &recordingFS{BuiltinFS: b, mapped: map[string]int{}, released: map[string]int{}, read: map[string]int{}}
}

func (r *recordingFS) count(m map[string]int, name string) {
	r.mu.Lock()
	m[name]++
	r.mu.Unlock()
}

func (r *recordingFS) counts(m map[string]int) map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]int{}
	for k, v := range m {
		out[k] = v
	}
	return out
}

func (r *recordingFS) Open(name string) (fs.File, error) {
	f, err := r.BuiltinFS.Open(name)
	if err != nil || !strings.HasSuffix(name, ".wasm") {
		return f, err
	}
	return &recordingFile{File: f, name: name, fsys: r}, nil
}

func (r *recordingFS) ReadFile(name string) ([]byte, error) {
	if strings.HasSuffix(name, ".wasm") {
		r.count(r.read, name)
	}
	return r.BuiltinFS.ReadFile(name)
}

func (r *recordingFS) Mapped(name string) ([]byte, func(), bool) {
	data, release, ok := r.BuiltinFS.Mapped(name)
	if !ok {
		return nil, nil, false
	}
	r.count(r.mapped, name)
	return data, func() { r.count(r.released, name); release() }, true
}

type recordingFile struct {
	fs.File
	name string
	fsys *recordingFS
}

func (f *recordingFile) Read(p []byte) (int, error) {
	f.fsys.count(f.fsys.read, f.name)
	return f.File.Read(p)
}

// TestOnlyTheRenderedBuiltinIsRead: with every default plugin available, identifying all of them (what the
// profile controller does for their status) reads none of their modules, and rendering with one reads that
// one only, in place, releasing its pages once: the other modules' pages of the executable never become
// resident, and no module is copied onto the heap.
func TestOnlyTheRenderedBuiltinIsRead(t *testing.T) {
	rec := newRecordingFS(t)
	m, err := New(Config{CacheDir: sharedCache(t)}, rec, prometheus.NewRegistry(), logr.Discard())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close(context.Background()) })
	names, err := m.BuiltinNames()
	if err != nil || len(names) < 6 {
		t.Fatalf("built-in plugins = %v, %v: run make plugins", names, err)
	}
	for _, name := range names {
		if _, err := m.Identify(Reference{Builtin: name}); err != nil {
			t.Fatalf("Identify(%s): %v", name, err)
		}
	}
	if got := rec.counts(rec.read); len(got) != 0 {
		t.Errorf("Identify read modules: %v", got)
	}
	if got := rec.counts(rec.mapped); len(got) != 0 {
		t.Errorf("Identify mapped modules: %v", got)
	}

	p, err := m.Resolve(context.Background(), Reference{Builtin: "ubuntu"})
	if err != nil {
		t.Fatal(err)
	}
	if p.Metadata().Name == "" {
		t.Errorf("ubuntu's metadata is empty: %+v", p.Metadata())
	}
	want := map[string]int{"ubuntu.wasm": 1}
	for _, c := range []struct {
		what string
		got  map[string]int
		want map[string]int
	}{
		{"mapped", rec.counts(rec.mapped), want},
		{"released", rec.counts(rec.released), want},
		{"read (copied)", rec.counts(rec.read), map[string]int{}},
	} {
		if len(c.got) != len(c.want) || c.got["ubuntu.wasm"] != c.want["ubuntu.wasm"] {
			t.Errorf("%s: %v, want %v", c.what, c.got, c.want)
		}
	}
}
