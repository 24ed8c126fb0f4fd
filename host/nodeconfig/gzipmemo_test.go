package nodeconfig

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"fmt"
	"io"
	"testing"
)

// TestGzipMemoIsBoundedAndExact: past its bound the memo forgets the least recently used contents and keeps
// the ones in use; whatever it answers decompresses to exactly the contents asked for.
func TestGzipMemoIsBoundedAndExact(t *testing.T) {
	saved := compressed
	t.Cleanup(func() { compressed = saved })
	compressed = newGzipMemo(4)

	shared := []byte("#!/bin/bash\necho the same for every MachineDeployment\n")
	for i := range 20 {
		unique := fmt.Appendf(nil, "token-%d for one MachineDeployment alone", i)
		for _, in := range [][]byte{shared, unique} {
			out := Gzip(in)
			zr, err := gzip.NewReader(bytes.NewReader(out))
			if err != nil {
				t.Fatal(err)
			}
			if got, err := io.ReadAll(zr); err != nil || !bytes.Equal(got, in) {
				t.Fatalf("Gzip(%q) decompresses to %q (%v)", in, got, err)
			}
		}
	}
	if n := compressed.order.Len(); n != 4 || len(compressed.entries) != 4 {
		t.Errorf("memo holds %d entries (%d in its map), want its bound 4", n, len(compressed.entries))
	}
	if _, ok := compressed.get(sha256.Sum256(shared)); !ok {
		t.Error("the contents used at every step were forgotten")
	}
	if _, ok := compressed.get(sha256.Sum256([]byte("token-0 for one MachineDeployment alone"))); ok {
		t.Error("the first unique contents are still remembered past the bound")
	}
}
