package plugins

import (
	"os"
	"syscall"
	"unsafe"
)

// dropPages tells the kernel it may drop the resident pages that lie wholly inside data, which must be part of
// a read-only file mapping (the executable's read-only data): MADV_DONTNEED then only unmaps them, and the
// next access reads them again from the file. Pages shared with neighbouring data are left alone, and so
// (by the kernel) are pages the executable maps with a huge page that reaches beyond data: at most 2 MiB at
// each end.
func dropPages(data []byte) {
	if len(data) == 0 {
		return
	}
	page := uintptr(os.Getpagesize())
	start := uintptr(unsafe.Pointer(unsafe.SliceData(data)))
	first := (start + page - 1) &^ (page - 1)
	end := (start + uintptr(len(data))) &^ (page - 1)
	if end <= first {
		return
	}
	_ = syscall.Madvise(data[first-start:end-start], syscall.MADV_DONTNEED) // advisory: a failure only keeps the pages
}
