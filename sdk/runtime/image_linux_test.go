package runtime

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"testing"
	"unsafe"

	"github.com/osmhq/osm/sdk/internal/wasmsnap"
)

// TestMemoryImageIsPrivateToEachInstance drives the allocator the way wazero does for a snapshotted module:
// the kernel's memory first, then the plugin's, whose initial capacity is the image's size. The plugin's
// memory starts as the image; what one instance writes, neither the image nor another instance sees; where
// the image cannot be mapped (a reservation beyond 4 GiB), it is copied.
func TestMemoryImageIsPrivateToEachInstance(t *testing.T) {
	const size = 3 * 65536
	segs := []wasmsnap.Segment{{Offset: 10, Bytes: []byte("first")}, {Offset: 2*65536 + 5, Bytes: []byte("third page")}}
	img, err := newMemoryImage(size, segs)
	if err != nil {
		t.Fatal(err)
	}
	defer img.close()
	want := make([]byte, size)
	for _, s := range segs {
		copy(want[s.Offset:], s.Bytes)
	}
	instance := func(max uint64) ([]byte, func()) {
		mm := &memoryMeter{image: img}
		kernel := mm.Allocate(65536, 1<<20)
		plugin := mm.Allocate(size, max)
		buf := plugin.Reallocate(size)
		return buf, func() { kernel.Free(); plugin.Free() }
	}
	a, freeA := instance(1 << 24)
	defer freeA()
	if !bytes.Equal(a, want) {
		t.Fatal("a plugin memory does not start as the image")
	}
	if !mappedFromImage(t, a) {
		t.Error("the plugin memory was copied although the image could be mapped")
	}
	copy(a[10:], "WRITE")
	a[size-1] = 1
	b, freeB := instance(1 << 24)
	defer freeB()
	if !bytes.Equal(b, want) {
		t.Error("a second instance sees the first one's writes")
	}
	if grown := len(b); grown != size {
		t.Fatalf("plugin memory of %d bytes", grown)
	}
	c, freeC := instance(1 << 33) // reserve refuses more than 4 GiB: the image is copied
	defer freeC()
	if !bytes.Equal(c, want) {
		t.Error("the copied image differs from the image")
	}
}

// mappedFromImage reports whether buf starts in a mapping of the image's memfd, per /proc/self/maps.
func mappedFromImage(t *testing.T, buf []byte) bool {
	t.Helper()
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Fatal(err)
	}
	addr := uint64(uintptr(unsafe.Pointer(&buf[0])))
	for _, line := range strings.Split(string(maps), "\n") {
		var lo, hi uint64
		if _, err := fmt.Sscanf(line, "%x-%x", &lo, &hi); err != nil || addr < lo || addr >= hi {
			continue
		}
		return strings.Contains(line, "memfd:osm-snapshot")
	}
	return false
}
