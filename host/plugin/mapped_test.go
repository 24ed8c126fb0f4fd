package plugin

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/osmhq/osm/plugins"
)

// recordingFS is the embedded plugins, recording every way a module's bytes are had: located in the
// executable (for the plugin host to read), or copied through ReadFile or Open and Read. relocate, if set,
// replaces what Locate answers.
type recordingFS struct {
	plugins.BuiltinFS
	relocate      func(path string, off, n int64) (string, int64, int64)
	mu            sync.Mutex
	located, read map[string]int
}

func newRecordingFS(t *testing.T) *recordingFS {
	t.Helper()
	b, ok := plugins.Builtin().(plugins.BuiltinFS)
	if !ok {
		t.Fatalf("plugins.Builtin() is a %T, not a plugins.BuiltinFS", plugins.Builtin())
	}
	return &recordingFS{BuiltinFS: b, located: map[string]int{}, read: map[string]int{}}
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

func (r *recordingFS) Locate(name string) (string, int64, int64, bool) {
	path, off, n, ok := r.BuiltinFS.Locate(name)
	if !ok {
		return "", 0, 0, false
	}
	r.count(r.located, name)
	if r.relocate != nil {
		path, off, n = r.relocate(path, off, n)
	}
	return path, off, n, true
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
// profile controller does for their status) reads none of their modules, and rendering with one has the
// plugin host read that one from the executable: the controller copies no module and touches none of the
// executable's pages that hold them.
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
	if got := rec.counts(rec.located); len(got) != 0 {
		t.Errorf("Identify located modules: %v", got)
	}

	p, err := m.Resolve(context.Background(), Reference{Builtin: "ubuntu"})
	if err != nil {
		t.Fatal(err)
	}
	if p.Metadata().Name != "ubuntu" {
		t.Errorf("ubuntu's metadata: %+v", p.Metadata())
	}
	if got := rec.counts(rec.located); len(got) != 1 || got["ubuntu.wasm"] != 1 {
		t.Errorf("located: %v, want ubuntu.wasm once", got)
	}
	if got := rec.counts(rec.read); len(got) != 0 {
		t.Errorf("read (copied) by the controller: %v, want none", got)
	}
}

// TestAModuleTheHostCannotReadIsSent: when the file range a built-in is located at cannot serve as the module
// (the executable replaced on disk since the controller started, or gone), the plugin host refuses it and
// the module's bytes are sent instead: the plugin still loads and renders.
func TestAModuleTheHostCannotReadIsSent(t *testing.T) {
	other := filepath.Join(t.TempDir(), "osm-controller")
	if err := os.WriteFile(other, make([]byte, 8<<20), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, relocate := range map[string]func(string, int64, int64) (string, int64, int64){
		"replaced executable": func(_ string, off, n int64) (string, int64, int64) { return other, off % (4 << 20), n },
		"missing file":        func(_ string, off, n int64) (string, int64, int64) { return other + ".gone", off, n },
		"range past the end":  func(path string, _, n int64) (string, int64, int64) { return path, 1 << 40, n },
	} {
		t.Run(name, func(t *testing.T) {
			rec := newRecordingFS(t)
			rec.relocate = relocate
			m, err := New(Config{CacheDir: sharedCache(t)}, rec, prometheus.NewRegistry(), logr.Discard())
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = m.Close(context.Background()) })
			p, err := m.Resolve(context.Background(), Reference{Builtin: "debian"})
			if err != nil {
				t.Fatal(err)
			}
			if p.Metadata().Name != "debian" {
				t.Errorf("debian's metadata: %+v", p.Metadata())
			}
			if got := rec.counts(rec.read); got["debian.wasm"] == 0 {
				t.Errorf("read (sent) by the controller: %v, want debian.wasm", got)
			}
		})
	}
}
