package plugintest

import (
	"os"
	"path/filepath"
	"testing"
)

func TestSourceHash(t *testing.T) {
	plugins := filepath.Join("..", "runtime", "testdata", "plugins")
	healthy, err := sourceHash(filepath.Join(plugins, "healthy"))
	if err != nil {
		t.Fatal(err)
	}
	again, err := sourceHash(filepath.Join(plugins, "healthy"))
	if err != nil || again != healthy {
		t.Errorf("hash is not stable: %s then %s (%v)", healthy, again, err)
	}
	loop, err := sourceHash(filepath.Join(plugins, "loop"))
	if err != nil || loop == healthy {
		t.Errorf("different plugins hash alike: %s (%v)", loop, err)
	}
	if _, err := sourceHash(t.TempDir()); err == nil {
		t.Error("a directory without a Go package hashed without error")
	}
}

func TestBuildCachesBySource(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a plugin")
	}
	t.Setenv(CacheDirEnv, t.TempDir())
	dir := filepath.Join("..", "examples", "template")
	first := Build(t, dir)
	info, err := os.Stat(first)
	if err != nil {
		t.Fatal(err)
	}
	second := Build(t, dir)
	info2, err := os.Stat(second)
	if err != nil {
		t.Fatal(err)
	}
	if first != second || !info.ModTime().Equal(info2.ModTime()) {
		t.Errorf("second build of unchanged sources was not served from the cache: %s, %s", first, second)
	}
	b, err := os.ReadFile(first)
	if err != nil || len(b) < 8 || string(b[:4]) != "\x00asm" {
		t.Errorf("build output is not a WebAssembly module (%v)", err)
	}
}
