package runtime

import (
	"sync"
	"sync/atomic"

	"github.com/tetratelabs/wazero/experimental"
)

// memoryMeter is the memory allocator of one instance. It records how large the instance's linear memories
// are, so the pool can drop instances that grew big, and on Linux it reserves each memory's maximum up front
// (see reserve), so growing never copies.
type memoryMeter struct {
	mu       sync.Mutex
	memories []*linearMemory
}

func (mm *memoryMeter) Allocate(capacity, max uint64) experimental.LinearMemory {
	m := &linearMemory{max: max}
	if buf, free := reserve(max); buf != nil {
		m.reserved, m.free = buf, free
	} else {
		m.heap = make([]byte, 0, capacity)
	}
	mm.mu.Lock()
	mm.memories = append(mm.memories, m)
	mm.mu.Unlock()
	return m
}

// bytes is the total size of the instance's linear memories.
func (mm *memoryMeter) bytes() uint64 {
	mm.mu.Lock()
	defer mm.mu.Unlock()
	var n uint64
	for _, m := range mm.memories {
		n += m.size.Load()
	}
	return n
}

// linearMemory backs one WebAssembly memory, either with a reserved mapping or with a Go slice.
type linearMemory struct {
	max      uint64
	size     atomic.Uint64
	reserved []byte
	free     func()
	heap     []byte
}

func (m *linearMemory) Reallocate(size uint64) []byte {
	if size > m.max {
		return nil
	}
	m.size.Store(size)
	if m.reserved != nil {
		return m.reserved[:size]
	}
	if size <= uint64(cap(m.heap)) {
		m.heap = m.heap[:size]
	} else {
		// Grow geometrically so a guest growing page by page does not copy quadratically.
		grown := make([]byte, size, min(m.max, max(size, 2*uint64(cap(m.heap)))))
		copy(grown, m.heap)
		m.heap = grown
	}
	return m.heap
}

func (m *linearMemory) Free() {
	if m.free != nil {
		m.free()
		m.free, m.reserved = nil, nil
	}
	m.heap = nil
	m.size.Store(0)
}
