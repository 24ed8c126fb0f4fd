package runtime

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/tetratelabs/wazero"

	"github.com/osmhq/osm/sdk/wasmtest"
)

// TestCodeDirsAreWazeros: the directory wazero's compilation cache writes a compiled module to is the first of
// CodeDirs. A host checks only CodeDirs before it runs code from a cache, so a mismatch would leave wazero's
// real directory unchecked.
func TestCodeDirsAreWazeros(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	cache, err := wazero.NewCompilationCacheWithDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigCompiler().WithCompilationCache(cache))
	defer func() { _ = rt.Close(ctx) }()
	mod := wasmtest.Module{Funcs: []wasmtest.Func{{Code: []byte{0x01}, Export: "f"}}}.Bytes()
	if _, err := rt.CompileModule(ctx, mod); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range entries {
		got = append(got, e.Name())
	}
	if want := CodeDirs()[0]; !slices.Equal(got, []string{want}) {
		t.Errorf("wazero wrote %v under %s; CodeDirs()[0] = %s", got, filepath.Base(dir), want)
	}
}

// TestSnapshotsAreInCodeDirs: the snapshot of a module sits in the last of CodeDirs.
func TestSnapshotsAreInCodeDirs(t *testing.T) {
	r := &Runtime{cfg: Config{CacheDir: "/c"}}
	path := r.snapshotPath("sha256:00")
	rel, err := filepath.Rel("/c", filepath.Dir(path))
	if err != nil || filepath.ToSlash(rel) != CodeDirs()[2] {
		t.Errorf("snapshot %s is in %s, CodeDirs()[2] = %s (%v)", path, rel, CodeDirs()[2], err)
	}
}
