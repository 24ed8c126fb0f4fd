package runtime

import "syscall"

// reserve maps max bytes of address space without committing memory (MAP_NORESERVE): the kernel backs pages
// only when the guest touches them, and growing the WebAssembly memory is just a longer slice of the same
// mapping. Without it wazero grows memory by copying, which made a guest allocating up to the 256 MiB cap
// spend seconds in memmove. The mapping lives outside the Go heap, so guest memory does not inflate the
// controller's GC pacing; it is unmapped when the instance closes.
func reserve(max uint64) ([]byte, func()) {
	if max == 0 || max > 1<<32 {
		return nil, nil
	}
	buf, err := syscall.Mmap(-1, 0, int(max), syscall.PROT_READ|syscall.PROT_WRITE,
		syscall.MAP_PRIVATE|syscall.MAP_ANONYMOUS|syscall.MAP_NORESERVE)
	if err != nil {
		return nil, nil
	}
	// Every instance starts by writing its snapshot (~2 MB for a Go plugin) into fresh pages: with 4 KiB pages
	// that was ~1,200 page faults per render, a third of its time (a plugin call went from 7.8 to 4.9 ms with
	// huge pages). Where transparent huge pages are off, the advice is ignored.
	_ = syscall.Madvise(buf, syscall.MADV_HUGEPAGE)
	return buf, func() { _ = syscall.Munmap(buf) }
}
