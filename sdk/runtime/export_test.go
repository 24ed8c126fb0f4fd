package runtime

// MemoryReserved returns the bytes of linear memory the runtime's calls have reserved now and at most at once.
func MemoryReserved(r *Runtime) (now, peak uint64) { return r.memory.stats() }

// CallMemory is what one call reserves from the budget.
func CallMemory(r *Runtime) uint64 { return r.cfg.callMemory() }

// ImageSize is the size of the memory image m's instances map, 0 when they start from data segments.
func ImageSize(m *Module) uint64 {
	if m.image == nil {
		return 0
	}
	return m.image.size
}

// Entries is how many digests the runtime holds, loaded or remembered as failed.
func Entries(r *Runtime) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.modules)
}

// HoldLane takes one of l's compile lanes, as a compilation does, until release is called.
func HoldLane(l *Limits) (release func()) {
	l.compiling <- struct{}{}
	return func() { <-l.compiling }
}
