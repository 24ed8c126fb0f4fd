package runtime

// MemoryReserved returns the bytes of linear memory the runtime's calls have reserved now and at most at once.
func MemoryReserved(r *Runtime) (now, peak uint64) { return r.memory.stats() }

// CallMemory is what one call reserves from the budget.
func CallMemory(r *Runtime) uint64 { return r.cfg.callMemory() }
