package runtime

import "syscall"

// reserve maps max bytes of address space without committing memory (MAP_NORESERVE): the kernel backs pages
// only when the guest touches them, and growing the WebAssembly memory is just a longer slice of the same
// mapping. Without it wazero grows memory by copying, which made a guest allocating up to the 256 MiB cap
// spend seconds in memmove. The mapping lives outside the Go heap, so guest memory does not inflate the
// host's GC pacing; it is unmapped when the instance closes.
func reserve(max uint64) ([]byte, func()) {
	if max == 0 || max > 1<<32 {
		return nil, nil
	}
	buf, err := syscall.Mmap(-1, 0, int(max), syscall.PROT_READ|syscall.PROT_WRITE,
		syscall.MAP_PRIVATE|syscall.MAP_ANONYMOUS|syscall.MAP_NORESERVE)
	if err != nil {
		return nil, nil
	}
	return buf, func() { _ = syscall.Munmap(buf) }
}
