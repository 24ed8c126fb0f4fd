package plugins

import (
	"bytes"
	"io/fs"
	"os"
	"testing"
)

// TestLocateFindsTheEmbeddedBytes: for every built-in module, the file range Locate names holds exactly the
// bytes ReadFile returns: what the plugin host reads from the controller's executable is the module.
func TestLocateFindsTheEmbeddedBytes(t *testing.T) {
	b, ok := Builtin().(BuiltinFS)
	if !ok {
		t.Fatalf("Builtin() is a %T, not a BuiltinFS", Builtin())
	}
	names, err := Names(b)
	if err != nil || len(names) < 6 {
		t.Fatalf("built-in plugins = %v, %v: run make plugins", names, err)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			want, err := fs.ReadFile(b, name+".wasm")
			if err != nil {
				t.Fatal(err)
			}
			path, off, n, ok := b.Locate(name + ".wasm")
			if !ok || path != exe || n != int64(len(want)) {
				t.Fatalf("Locate(%s.wasm) = %s at %d, %d bytes, %v; want %d bytes in %s", name, path, off, n, ok, len(want), exe)
			}
			f, err := os.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = f.Close() }()
			got := make([]byte, n)
			if _, err := f.ReadAt(got, off); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("the %d bytes at %d of %s are not %s.wasm", n, off, path, name)
			}
		})
	}
	for _, name := range []string{"missing.wasm", "../embed.go", "", "."} {
		if path, _, _, ok := b.Locate(name); ok || path != "" {
			t.Errorf("Locate(%q) = %s, %v", name, path, ok)
		}
	}
}
