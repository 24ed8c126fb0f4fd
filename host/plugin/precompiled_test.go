package plugin

import (
	"bytes"
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/osmhq/osm/host/pluginhost"
	"github.com/osmhq/osm/plugins"
)

// wazeroEntries lists the compiled-code entries under a cache directory, and whether each is a link (seeded
// from the precompiled code) or a file a host wrote (it compiled).
func wazeroEntries(t *testing.T, dir string) map[string]bool {
	t.Helper()
	links := map[string]bool{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		if strings.HasPrefix(rel, "wazero-") && !d.IsDir() {
			links[rel] = d.Type()&fs.ModeSymlink != 0
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return links
}

func precompiled(t *testing.T) string {
	t.Helper()
	dir := plugins.PrecompiledDir()
	if dir == "" {
		t.Fatal("no precompiled default plugins: run make plugins")
	}
	return dir
}

// TestDefaultPluginsNeverCompile: with the machine code make plugins compiled, a host loads a default plugin
// without compiling it: every compiled-code entry in the hosts' cache is still a link to the precompiled one.
func TestDefaultPluginsNeverCompile(t *testing.T) {
	cache := t.TempDir()
	reg := prometheus.NewRegistry()
	m, err := New(Config{CacheDir: cache, Precompiled: precompiled(t)}, plugins.Builtin(), reg, logr.Discard())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close(context.Background()) })
	for _, name := range []string{"ubuntu", "flatcar"} {
		if _, err := m.Resolve(context.Background(), Reference{Builtin: name}); err != nil {
			t.Fatal(err)
		}
	}
	// The built-in host cannot write its cache: what it compiles stays in its memory, which only the compile
	// metric's layer tells (none: compiled from scratch; disk: read from the seeded cache).
	if fromScratch, fromDisk := compiles(t, reg, "none"), compiles(t, reg, "disk"); fromScratch != 0 || fromDisk != 2 {
		t.Errorf("%d default plugins compiled from scratch and %d read from the cache, want 0 and 2", fromScratch, fromDisk)
	}
	entries := wazeroEntries(t, pluginhost.BuiltinDir(filepath.Join(cache, "wazero")))
	if len(entries) == 0 {
		t.Fatal("no compiled code in the hosts' cache")
	}
	for name, link := range entries {
		if !link {
			t.Errorf("a host compiled %s", name)
		}
	}
}

// TestPrecompiledCodeThatDoesNotFitCompiles: machine code that is not what this wazero reads (damaged here; another
// version or architecture wazero itself tells apart) is compiled again, never a failure (the garbage could not
// have run), and the precompiled files are never written.
func TestPrecompiledCodeThatDoesNotFitCompiles(t *testing.T) {
	src := t.TempDir()
	if err := os.CopyFS(src, os.DirFS(precompiled(t))); err != nil {
		t.Fatal(err)
	}
	garbage := bytes.Repeat([]byte("not machine code"), 1024)
	for name := range wazeroEntries(t, src) {
		if err := os.WriteFile(filepath.Join(src, name), garbage, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cache := t.TempDir()
	m, err := New(Config{CacheDir: cache, Precompiled: src}, plugins.Builtin(), prometheus.NewRegistry(), logr.Discard())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close(context.Background()) })
	p, err := m.Resolve(context.Background(), Reference{Builtin: "ubuntu"})
	if err != nil {
		t.Fatalf("with damaged precompiled code: %v", err)
	}
	if p.Metadata().Name != "ubuntu" {
		t.Errorf("metadata: %+v", p.Metadata())
	}
	for name := range wazeroEntries(t, src) {
		if b, err := os.ReadFile(filepath.Join(src, name)); err != nil || !bytes.Equal(b, garbage) {
			t.Errorf("the precompiled %s was changed (%v)", name, err)
		}
	}
}

// compiles counts the compiles of the layer in osm_plugin_compile_seconds.
func compiles(t *testing.T, reg *prometheus.Registry, layer string) uint64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var n uint64
	for _, f := range families {
		if f.GetName() != "osm_plugin_compile_seconds" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "cache" && l.GetValue() == layer {
					n += m.GetHistogram().GetSampleCount()
				}
			}
		}
	}
	return n
}
