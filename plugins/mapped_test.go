package plugins

import (
	"bytes"
	"io/fs"
	"testing"
	"unsafe"
)

// TestMappedIsTheEmbeddedFile: every built-in module is handed out in place (the same memory each time, not
// a copy) with the bytes ReadFile copies, which stay the same after their pages were released.
func TestMappedIsTheEmbeddedFile(t *testing.T) {
	b, ok := Builtin().(BuiltinFS)
	if !ok {
		t.Fatalf("Builtin() is a %T, not a BuiltinFS", Builtin())
	}
	names, err := Names(b)
	if err != nil || len(names) < 6 {
		t.Fatalf("built-in plugins = %v, %v: run make plugins", names, err)
	}
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			want, err := fs.ReadFile(b, name+".wasm")
			if err != nil {
				t.Fatal(err)
			}
			data, release, ok := b.Mapped(name + ".wasm")
			if !ok || !bytes.Equal(data, want) {
				t.Fatalf("Mapped(%s.wasm) = %d bytes, %v; want the %d bytes of the file", name, len(data), ok, len(want))
			}
			again, _, _ := b.Mapped(name + ".wasm")
			if unsafe.SliceData(again) != unsafe.SliceData(data) {
				t.Error("Mapped returned a copy: two calls gave different memory")
			}
			release()
			if !bytes.Equal(data, want) {
				t.Error("the bytes changed after release")
			}
		})
	}
	for _, name := range []string{"missing.wasm", "../embed.go", "", "."} {
		if data, release, ok := b.Mapped(name); ok || data != nil || release != nil {
			t.Errorf("Mapped(%q) = %d bytes, %v", name, len(data), ok)
		}
	}
}
