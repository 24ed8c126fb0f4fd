package runtime

import "testing"

func TestLinearMemory(t *testing.T) {
	tests := []struct {
		name     string
		reserved bool
	}{{"reserved mapping", true}, {"go slice", false}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			const max = 4 * wasmPageSize
			m := &linearMemory{max: max}
			if tt.reserved {
				if m.reserved, m.free = reserve(max); m.reserved == nil {
					t.Skip("no reserved mappings on this platform")
				}
			}
			buf := m.Reallocate(wasmPageSize)
			buf[10] = 42
			grown := m.Reallocate(3 * wasmPageSize)
			if len(grown) != 3*wasmPageSize || grown[10] != 42 {
				t.Fatalf("grown memory has length %d and byte %d, want %d and 42", len(grown), grown[10], 3*wasmPageSize)
			}
			if m.Reallocate(max+1) != nil {
				t.Error("Reallocate beyond max succeeded")
			}
			if m.size.Load() != 3*wasmPageSize {
				t.Errorf("size = %d", m.size.Load())
			}
			m.Free()
			m.Free() // idempotent
		})
	}
}

func TestMemoryMeter(t *testing.T) {
	var mm memoryMeter
	a := mm.Allocate(0, 8*wasmPageSize)
	b := mm.Allocate(0, 8*wasmPageSize)
	a.Reallocate(2 * wasmPageSize)
	b.Reallocate(wasmPageSize)
	if got := mm.bytes(); got != 3*wasmPageSize {
		t.Errorf("bytes() = %d, want %d", got, 3*wasmPageSize)
	}
	a.Free()
	b.Free()
}
