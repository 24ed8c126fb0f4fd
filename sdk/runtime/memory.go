package runtime

import (
	"sync"
	"sync/atomic"

	"github.com/tetratelabs/wazero/experimental"
)

// memoryMeter is the memory allocator of one instance. It records how large the instance's linear memories
// grew, caps the first one (the Extism kernel's, which holds the call's input and output: Extism instantiates
// its kernel before the plugin) at kernelMax, and on Linux reserves each memory's maximum up front (see
// reserve), so growing never copies.
type memoryMeter struct {
	kernelMax uint64
	// image, when set, is the plugin's initial memory (see memoryImage): the plugin's memory starts as a
	// copy-on-write mapping of it.
	image *memoryImage

	mu       sync.Mutex
	memories []*linearMemory
}

func (mm *memoryMeter) Allocate(capacity, maxBytes uint64) experimental.LinearMemory {
	mm.mu.Lock()
	kernel := len(mm.memories) == 0
	mm.mu.Unlock()
	m := &linearMemory{max: maxBytes}
	if kernel && mm.kernelMax > 0 && mm.kernelMax < maxBytes {
		// Never below the initial capacity, which wazero allocates unconditionally.
		m.max, m.capped = mm.kernelMax, true
		m.max = max(m.max, capacity)
	}
	if img := mm.image; !kernel && img != nil && capacity == img.size {
		if buf, free := img.mapInto(m.max); buf != nil {
			m.reserved, m.free = buf, free
		} else {
			// The image cannot be mapped: copy it, as wazero would have copied the segments.
			m.heap = make([]byte, capacity, min(capacity, m.max))
			if img.copyTo(m.heap) != nil {
				m.heap = nil // wazero's bounds check fails the instantiation
			}
		}
	} else if buf, free := reserve(m.max); buf != nil {
		m.reserved, m.free = buf, free
	} else {
		m.heap = make([]byte, 0, min(capacity, m.max))
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

// kernelFull reports whether the kernel's memory refused to grow: the call's output did not fit.
func (mm *memoryMeter) kernelFull() bool {
	mm.mu.Lock()
	defer mm.mu.Unlock()
	return len(mm.memories) > 0 && mm.memories[0].refused.Load()
}

// linearMemory backs one WebAssembly memory, either with a reserved mapping or with a Go slice.
type linearMemory struct {
	max      uint64
	capped   bool // max is the kernel's cap, below the runtime's limit
	size     atomic.Uint64
	refused  atomic.Bool // a growth beyond max was refused
	reserved []byte
	free     func()
	heap     []byte
}

func (m *linearMemory) Reallocate(size uint64) []byte {
	if size > m.max {
		m.refused.Store(m.capped)
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
