package nodeconfig_test

import (
	"bytes"
	"compress/gzip"
	"io"
	"strings"
	"sync"
	"testing"

	"github.com/osmhq/osm/host/nodeconfig"
)

// TestGzipIsDeterministicAcrossReuse: a reused compressor gives the same bytes as a fresh one, concurrently
// too, and they decompress to the input.
func TestGzipIsDeterministicAcrossReuse(t *testing.T) {
	inputs := [][]byte{[]byte(strings.Repeat("#!/bin/bash\necho osm\n", 300)), []byte("short"), nil}
	want := make([][]byte, len(inputs))
	for i, in := range inputs {
		var buf bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
		_, _ = zw.Write(in)
		_ = zw.Close()
		want[i] = buf.Bytes()
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 20 {
				for i, in := range inputs {
					got := nodeconfig.Gzip(in)
					if !bytes.Equal(got, want[i]) {
						t.Errorf("input %d: a reused compressor gives other bytes", i)
						return
					}
					zr, err := gzip.NewReader(bytes.NewReader(got))
					if err != nil {
						t.Error(err)
						return
					}
					if out, err := io.ReadAll(zr); err != nil || !bytes.Equal(out, in) {
						t.Errorf("input %d does not round-trip: %v", i, err)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
}
