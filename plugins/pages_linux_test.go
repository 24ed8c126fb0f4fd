package plugins

import (
	"encoding/binary"
	"os"
	"testing"
	"unsafe"
)

// TestReleaseDropsResidentPages: reading a module makes its pages of the executable resident; release unmaps
// them from the process (read through /proc/self/pagemap), and reading again maps them back, unchanged.
func TestReleaseDropsResidentPages(t *testing.T) {
	data, release, ok := Builtin().(BuiltinFS).Mapped("ubuntu.wasm")
	if !ok {
		t.Fatal("ubuntu.wasm is not mapped: run make plugins")
	}
	sum := func() (s byte) {
		for _, c := range data {
			s += c
		}
		return s
	}
	before := sum()
	pages := len(data) / os.Getpagesize()
	if n := residentPages(t, data); n < pages-2 {
		t.Fatalf("%d of the module's %d pages resident after reading all of it", n, pages)
	}
	release()
	// A huge page (2 MiB) the kernel maps across the end of the module and the data beside it stays: count the
	// pages of the huge-page blocks that lie wholly inside the module.
	inner := innerBlocks(data)
	if len(inner) == 0 {
		t.Fatalf("ubuntu.wasm (%d bytes) spans no whole 2 MiB block", len(data))
	}
	if n := residentPages(t, inner); n != 0 {
		t.Errorf("%d of the %d pages inside the module's whole huge-page blocks still resident after release", n, len(inner)/os.Getpagesize())
	}
	if n := residentPages(t, data); n > pages-len(inner)/os.Getpagesize() {
		t.Errorf("%d of %d pages resident after release", n, pages)
	}
	if sum() != before {
		t.Error("the module's bytes changed after release")
	}
	if n := residentPages(t, data); n < pages-2 {
		t.Errorf("%d of %d pages resident after reading the module again", n, pages)
	}
}

// hugePage is the size of the huge pages the kernel may map a file with (PMD size on amd64 and arm64).
const hugePage = 2 << 20

// innerBlocks is the part of data made of whole hugePage-aligned blocks.
func innerBlocks(data []byte) []byte {
	start := uintptr(unsafe.Pointer(unsafe.SliceData(data)))
	first := (start + hugePage - 1) &^ (hugePage - 1)
	end := (start + uintptr(len(data))) &^ (hugePage - 1)
	if end <= first {
		return nil
	}
	return data[first-start : end-start]
}

// residentPages counts the pages of data mapped in this process: bit 63 of each page's /proc/self/pagemap
// entry.
func residentPages(t *testing.T, data []byte) int {
	t.Helper()
	f, err := os.Open("/proc/self/pagemap")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	page := uintptr(os.Getpagesize())
	start := uintptr(unsafe.Pointer(unsafe.SliceData(data)))
	first, last := start/page, (start+uintptr(len(data))-1)/page
	buf := make([]byte, 8*(last-first+1))
	if _, err := f.ReadAt(buf, int64(first*8)); err != nil {
		t.Fatal(err)
	}
	n := 0
	for i := 0; i < len(buf); i += 8 {
		if binary.LittleEndian.Uint64(buf[i:])>>63 == 1 {
			n++
		}
	}
	return n
}
