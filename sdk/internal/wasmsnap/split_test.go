package wasmsnap_test

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/tetratelabs/wazero"

	"github.com/osmhq/osm/sdk/internal/wasmsnap"
)

// TestSplitGivesBackTheImage: a module Build made, taken apart by Split, is the same module without data
// segments, and its segments placed in a memory of the size Split reports are exactly the image Build was given.
func TestSplitGivesBackTheImage(t *testing.T) {
	mem := make([]byte, 3*65536)
	copy(mem[7:], "hello")
	copy(mem[70000:], bytes.Repeat([]byte{9}, 2000))
	mem[len(mem)-1] = 1
	built, err := wasmsnap.Build(initModule(false), wasmsnap.Image{Globals: []uint64{1, 2, 3}, Memory: mem})
	if err != nil {
		t.Fatal(err)
	}
	code, size, segs, err := wasmsnap.Split(built)
	if err != nil {
		t.Fatal(err)
	}
	if size != uint64(len(mem)) {
		t.Fatalf("memory size %d, want %d", size, len(mem))
	}
	got := make([]byte, size)
	for _, s := range segs {
		copy(got[s.Offset:], s.Bytes)
	}
	if !bytes.Equal(got, mem) {
		t.Error("the segments do not make up the image")
	}
	// The code module instantiates with a zeroed memory of the image's size, its globals set.
	ctx := context.Background()
	rt := wazero.NewRuntime(ctx)
	defer rt.Close(ctx)
	mod, err := rt.Instantiate(ctx, code)
	if err != nil {
		t.Fatal(err)
	}
	if got := mod.Memory().Size(); got != uint32(len(mem)) {
		t.Errorf("code module's memory: %d bytes, want %d", got, len(mem))
	}
	if b, _ := mod.Memory().Read(7, 5); string(b) != "\x00\x00\x00\x00\x00" {
		t.Errorf("code module still carries data: %q", b)
	}
	if g := call(t, mod, "g0"); g != 1 {
		t.Errorf("g0 = %d, want 1", g)
	}
}

// TestSplitRefusesWhatBuildDoesNotWrite: a module whose data is not Build's (here a passive segment, as
// bulk-memory modules have) is refused, and the host keeps its segments.
func TestSplitRefusesWhatBuildDoesNotWrite(t *testing.T) {
	header := []byte{0, 'a', 's', 'm', 1, 0, 0, 0}
	memory := []byte{5, 3, 1, 0x00, 1}                    // one memory of one page
	passive := append([]byte{11, 8, 1, 1, 5}, "hello"...) // one passive segment
	mod := append(append(append([]byte{}, header...), memory...), passive...)
	active := append([]byte{11, 8, 1, 0, 0x41, 0, 0x0b, 2}, "hi"...)
	if _, size, segs, err := wasmsnap.Split(append(append(append([]byte{}, header...), memory...), active...)); err != nil || size != 65536 || len(segs) != 1 {
		t.Fatalf("Split of an active segment: %d bytes, %d segments, %v", size, len(segs), err)
	}
	if _, _, _, err := wasmsnap.Split(mod); err == nil || !strings.Contains(err.Error(), "not an active segment") {
		t.Errorf("Split of a passive segment: err = %v", err)
	}
	if _, _, _, err := wasmsnap.Split([]byte("not wasm")); err == nil {
		t.Error("Split accepted garbage")
	}
}
