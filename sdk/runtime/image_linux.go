package runtime

import (
	"errors"
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/osmhq/osm/sdk/internal/wasmsnap"
)

// memoryImage is the initial memory of a snapshotted module's instances, in a sealed memfd that each instance
// maps copy-on-write (mapInto): an instance reads the image's pages where they are and copies only the pages
// it writes, instead of wazero copying every data segment into every instance's fresh memory, which was the
// largest single cost of a render (13 % of the controller's CPU at 500 new MachineDeployments). Each mapping
// is private: what one instance writes no other instance, and no later one, can see; the seals make the image
// itself unchangeable, also by this process.
type memoryImage struct {
	fd   int
	size uint64
}

// newMemoryImage writes the segments into a new memfd of size bytes and seals it.
func newMemoryImage(size uint64, segs []wasmsnap.Segment) (_ *memoryImage, err error) {
	fd, err := unix.MemfdCreate("osm-snapshot", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return nil, fmt.Errorf("memfd_create: %w", err)
	}
	defer func() {
		if err != nil {
			_ = unix.Close(fd)
		}
	}()
	if err := unix.Ftruncate(fd, int64(size)); err != nil {
		return nil, fmt.Errorf("sizing the memory image: %w", err)
	}
	for _, s := range segs {
		for b, off := s.Bytes, int64(s.Offset); len(b) > 0; {
			n, err := unix.Pwrite(fd, b, off)
			if err != nil {
				return nil, fmt.Errorf("writing the memory image: %w", err)
			}
			b, off = b[n:], off+int64(n)
		}
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_SHRINK|unix.F_SEAL_GROW|unix.F_SEAL_WRITE|unix.F_SEAL_SEAL); err != nil {
		return nil, fmt.Errorf("sealing the memory image: %w", err)
	}
	return &memoryImage{fd: fd, size: size}, nil
}

// mapInto returns a reservation of max bytes (see reserve) that starts with a private copy-on-write mapping
// of the image, and the function that unmaps both; nil when it cannot, and the caller copies the image.
func (img *memoryImage) mapInto(max uint64) ([]byte, func()) {
	if img.size == 0 || max < img.size {
		return nil, nil
	}
	buf, free := reserve(max)
	if buf == nil {
		return nil, nil
	}
	_, err := unix.MmapPtr(img.fd, 0, unsafe.Pointer(&buf[0]), uintptr(img.size),
		unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_FIXED)
	if err != nil {
		free()
		return nil, nil
	}
	return buf, free
}

// copyTo copies the image into dst, which holds at least size bytes.
func (img *memoryImage) copyTo(dst []byte) error {
	for off := 0; off < int(img.size); {
		n, err := unix.Pread(img.fd, dst[off:img.size], int64(off))
		if err != nil {
			return err
		}
		if n == 0 {
			return errors.New("memory image ended early")
		}
		off += n
	}
	return nil
}

func (img *memoryImage) close() { _ = unix.Close(img.fd) }
