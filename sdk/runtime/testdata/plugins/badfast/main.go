// Command badfast implements the fast I/O path (SPEC.md §8) by hand, without the guest package, and breaks its
// calling convention in the ways the request's config "mode" asks for. Its standard exports fail: on the fast
// path they are never called.
package main

import (
	"os"
	"strings"
	"unsafe"
)

const metadata = `{"abiVersion":"v1","name":"badfast","version":"1.0.0","operatingSystems":[{"name":"testos"}],` +
	`"provisioningUtilities":["cloud-init"],"cloudProviders":["*"]}`

//go:wasmimport extism:host/env output_set
func outputSet(offset, length uint64)

var (
	in, out   []byte
	armed     string // a misbehaviour of the next osm_v1_alloc
	iteration int
)

//go:wasmexport osm_metadata
func osmMetadata() int32 { return 1 }

//go:wasmexport osm_render
func osmRender() int32 { return 1 }

//go:wasmexport osm_v1_alloc
func alloc(size int32) int32 {
	if armed == "alloc-out-of-bounds" {
		armed = ""
		return -64 // 0xffffffc0: the last bytes of a 4 GiB address space
	}
	in = make([]byte, size)
	return int32(uintptr(unsafe.Pointer(unsafe.SliceData(in))))
}

//go:wasmexport osm_v1_call
func call(id, ptr, size int32) int64 {
	if id == 0 {
		return result(metadata, false)
	}
	req := string(in[:size])
	mode := ""
	if _, after, ok := strings.Cut(req, `"mode":"`); ok {
		mode, _, _ = strings.Cut(after, `"`)
	}
	switch mode {
	case "error":
		return result("mirror must be a URL", true)
	case "out-of-bounds":
		return int64(0x7fff0000)<<32 | 16
	case "length-out-of-bounds":
		r := result(`{"abiVersion":"v1"}`, false)
		return r | 0x7ffffff0
	case "panic":
		panic("fast path exploded")
	case "loop":
		for {
			iteration++
		}
	case "extism":
		outputSet(0, 0)
	case "exit":
		os.Exit(0)
	case "arm-alloc-out-of-bounds":
		armed = "alloc-out-of-bounds"
	}
	return result(`{"abiVersion":"v1","config":{"files":[{"path":"/etc/badfast","content":{"inline":{"data":"`+mode+`"}}}]}}`, false)
}

func result(s string, failed bool) int64 {
	out = []byte(s)
	r := int64(uintptr(unsafe.Pointer(unsafe.SliceData(out))))<<32 | int64(len(out))
	if failed {
		r |= 1 << 31
	}
	return r
}

func main() {}
