package oci

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2/content/oci"
)

// TestReadTarRefusesHostileArchives replays archives built to make "osmctl plugin load" consume far more than
// their size, or write outside its store: each must fail with an error naming the entry and the cause, at
// once, without allocating what the archive claims.
func TestReadTarRefusesHostileArchives(t *testing.T) {
	const gib = 1 << 30
	oneFile := func(name string) []byte {
		var buf bytes.Buffer
		writeOneFile(t, &buf, name)
		return buf.Bytes()
	}
	tests := []struct {
		name    string
		archive []byte
		wantErr string
	}{
		{name: "PAX sparse file of 3 GiB", archive: paxSparseTar(t, "blobs/sha256/x", 3*gib), wantErr: "is a sparse file"},
		{name: "GNU sparse file", archive: headerOnlyTar(t, &tar.Header{Name: "s", Typeflag: tar.TypeGNUSparse, Size: 3 * gib, Format: tar.FormatGNU}), wantErr: "is a sparse file"},
		{name: "entry claiming 3 GiB", archive: headerOnlyTar(t, &tar.Header{Name: "blobs/sha256/x", Typeflag: tar.TypeReg, Size: 3 * gib}), wantErr: "claims 3221225472 bytes"},
		{name: "truncated entry", archive: headerOnlyTar(t, &tar.Header{Name: "index.json", Typeflag: tar.TypeReg, Size: 1000}), wantErr: "index.json"},
		{name: "symlink", archive: headerOnlyTar(t, &tar.Header{Name: "index.json", Typeflag: tar.TypeSymlink, Linkname: "/etc/passwd"}), wantErr: "links and special files are refused"},
		{name: "hard link", archive: headerOnlyTar(t, &tar.Header{Name: "index.json", Typeflag: tar.TypeLink, Linkname: "/etc/passwd"}), wantErr: "links and special files are refused"},
		{name: "device", archive: headerOnlyTar(t, &tar.Header{Name: "zero", Typeflag: tar.TypeChar, Devmajor: 1, Devminor: 5}), wantErr: "links and special files are refused"},
		{name: "parent path", archive: oneFile("../evil"), wantErr: "leaves the archive"},
		{name: "absolute path", archive: oneFile("/etc/passwd"), wantErr: "leaves the archive"},
		{name: "nested parent path", archive: oneFile("a/../../evil"), wantErr: "leaves the archive"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if len(tt.archive) > 10<<10 {
				t.Fatalf("the hostile archive is %d bytes; the attack is a small one", len(tt.archive))
			}
			before := totalAlloc()
			start := time.Now()
			_, err := readTar(bytes.NewReader(tt.archive), (&Client{opts: Options{MaxModuleSize: DefaultMaxModuleSize}}).archiveLimits())
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("readTar() error = %v, want one containing %q", err, tt.wantErr)
			}
			if took := time.Since(start); took > 5*time.Second {
				t.Errorf("refusing took %s", took)
			}
			if alloc := totalAlloc() - before; alloc > 8<<20 {
				t.Errorf("refusing allocated %d bytes", alloc)
			}
		})
	}
}

// TestLoadRefusesSparseArchive is the attack through the real path: Client.Load, as "osmctl plugin load" runs it.
func TestLoadRefusesSparseArchive(t *testing.T) {
	reg := newRegistry(t, false, nil)
	c := reg.client(t, Options{})
	before := totalAlloc()
	_, err := c.Load(context.Background(), bytes.NewReader(paxSparseTar(t, "blobs/sha256/x", 3<<30)), reg.host)
	if err == nil || !strings.Contains(err.Error(), `load: archive entry "blobs/sha256/x" is a sparse file`) {
		t.Fatalf("Load() error = %v", err)
	}
	if alloc := totalAlloc() - before; alloc > 8<<20 {
		t.Errorf("refusing allocated %d bytes", alloc)
	}
}

func TestReadTarLimits(t *testing.T) {
	archive := func(n, size int) []byte {
		var buf bytes.Buffer
		tw := newTarWriter(&buf)
		for i := range n {
			if err := tw.add(fmt.Sprintf("blobs/%d", i), make([]byte, size)); err != nil {
				t.Fatal(err)
			}
		}
		if err := tw.Close(); err != nil {
			t.Fatal(err)
		}
		return buf.Bytes()
	}
	limits := archiveLimits{entry: 1000, total: 3000, entries: 4}
	tests := []struct {
		name    string
		archive []byte
		wantErr string
	}{
		{name: "at the limits", archive: archive(3, 1000)},
		{name: "entry too large", archive: archive(1, 1001), wantErr: `archive entry "blobs/0" claims 1001 bytes, more than the 1000 allowed`},
		{name: "total too large", archive: archive(4, 800), wantErr: "archive entries add up to more than 3000 bytes"},
		{name: "too many entries", archive: archive(5, 1), wantErr: "archive has more than 4 entries"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			files, err := readTar(bytes.NewReader(tt.archive), limits)
			if tt.wantErr == "" {
				if err != nil || len(files) != 3 {
					t.Fatalf("readTar() = %d files, %v", len(files), err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("readTar() error = %v, want %q", err, tt.wantErr)
			}
		})
	}
}

func totalAlloc() uint64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.TotalAlloc
}

// FuzzArchive feeds arbitrary bytes to the archive reader and the layout parser behind "osmctl plugin load".
// Whatever the input, reading must stay within the limits and never panic.
//
//	go test -run '^$' -fuzz FuzzArchive -fuzztime 2m -fuzzminimizetime 1x ./host/oci
//
// (Minimizing inputs that hold megabytes of entries takes the default minimizer minutes per input.)
func FuzzArchive(f *testing.F) {
	f.Add(validLayoutTar(f))
	f.Add(paxSparseTar(f, "blobs/sha256/x", 1<<20))
	f.Add(headerOnlyTar(f, &tar.Header{Name: "x", Typeflag: tar.TypeReg, Size: 1 << 40}))
	f.Add([]byte{})
	limits := archiveLimits{entry: 1 << 20, total: 4 << 20, entries: 64}
	f.Fuzz(func(t *testing.T, archive []byte) {
		files, err := readTar(bytes.NewReader(archive), limits)
		if err != nil {
			return
		}
		var total int64
		for name, file := range files {
			if strings.HasPrefix(name, "/") || strings.HasPrefix(name, "../") || int64(len(file.Data)) > limits.entry {
				t.Fatalf("readTar accepted entry %q of %d bytes", name, len(file.Data))
			}
			total += int64(len(file.Data))
		}
		if total > limits.total || len(files) > limits.entries {
			t.Fatalf("readTar accepted %d bytes in total", total)
		}
		store, err := oci.NewFromFS(context.Background(), files)
		if err != nil {
			return
		}
		_ = store.Tags(context.Background(), "", func([]string) error { return nil })
	})
}

// validLayoutTar is an archive as Save writes it, of one artifact.
func validLayoutTar(t testing.TB) []byte {
	module := fakeModule("fuzz")
	config := []byte(`{"architecture":"wasm","os":"wasip1"}`)
	layer := ocispec.Descriptor{MediaType: MediaTypeWasmLayer, Digest: digest.FromBytes(module), Size: int64(len(module))}
	cdesc := ocispec.Descriptor{MediaType: MediaTypeWasmConfig, Digest: digest.FromBytes(config), Size: int64(len(config))}
	manifest, _ := json.Marshal(ocispec.Manifest{MediaType: ocispec.MediaTypeImageManifest, Config: cdesc, Layers: []ocispec.Descriptor{layer}})
	mdesc := ocispec.Descriptor{MediaType: ocispec.MediaTypeImageManifest, Digest: digest.FromBytes(manifest), Size: int64(len(manifest)),
		Annotations: map[string]string{ocispec.AnnotationRefName: "registry.example.com/osm/p:1"}}
	index, _ := json.Marshal(ocispec.Index{MediaType: ocispec.MediaTypeImageIndex, Manifests: []ocispec.Descriptor{mdesc}})
	var buf bytes.Buffer
	tw := newTarWriter(&buf)
	for _, f := range []struct {
		name string
		data []byte
	}{
		{"oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`)},
		{"index.json", index},
		{"blobs/sha256/" + layer.Digest.Encoded(), module},
		{"blobs/sha256/" + cdesc.Digest.Encoded(), config},
		{"blobs/sha256/" + mdesc.Digest.Encoded(), manifest},
	} {
		if err := tw.add(f.name, f.data); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}
