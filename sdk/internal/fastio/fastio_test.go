package fastio

import (
	"testing"

	"github.com/osmhq/osm/sdk/abi"
)

func TestIDs(t *testing.T) {
	// The IDs are part of the ABI.
	for export, id := range map[string]int32{abi.ExportMetadata: 0, abi.ExportRender: 1, abi.ExportValidate: 2, abi.ExportEncode: 3} {
		if got, ok := ID(export); !ok || got != id {
			t.Errorf("ID(%s) = %d, %v; want %d", export, got, ok, id)
		}
		if got, ok := Export(id); !ok || got != export {
			t.Errorf("Export(%d) = %s, %v; want %s", id, got, ok, export)
		}
	}
	for _, id := range []int32{-1, 4} {
		if _, ok := Export(id); ok {
			t.Errorf("Export(%d) exists", id)
		}
	}
	if _, ok := ID("_initialize"); ok {
		t.Error("ID(_initialize) exists")
	}
}

func TestPack(t *testing.T) {
	for _, c := range []struct {
		ptr, n uint32
		failed bool
	}{{0, 0, false}, {0x10000, 19000, false}, {0xfffffff0, MaxLen, true}, {8, 1, true}} {
		ptr, n, failed := Unpack(Pack(c.ptr, c.n, c.failed))
		if ptr != c.ptr || n != c.n || failed != c.failed {
			t.Errorf("Unpack(Pack(%#x, %d, %v)) = %#x, %d, %v", c.ptr, c.n, c.failed, ptr, n, failed)
		}
	}
}
