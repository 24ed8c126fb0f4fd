//go:build !linux

package runtime

import (
	"errors"

	"github.com/osmhq/osm/sdk/internal/wasmsnap"
)

// memoryImage exists on Linux only; elsewhere snapshotted modules keep their data segments.
type memoryImage struct{ size uint64 }

func newMemoryImage(uint64, []wasmsnap.Segment) (*memoryImage, error) {
	return nil, errors.New("memory images need Linux")
}

func (*memoryImage) mapInto(uint64) ([]byte, func()) { return nil, nil }
func (*memoryImage) copyTo([]byte) error             { return errors.New("memory images need Linux") }
func (*memoryImage) close()                          {}
