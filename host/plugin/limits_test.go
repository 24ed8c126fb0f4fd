package plugin

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	goruntime "runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/osmhq/osm/host/oci"
)

// withCustomSection returns wasm with a custom section appended: a valid module with the same code and a
// different digest, as a registry full of distinct plugins would serve.
func withCustomSection(wasm []byte, name string) []byte {
	var payload []byte
	payload = binary.AppendUvarint(payload, uint64(len(name)))
	payload = append(payload, name...)
	payload = append(payload, "distinct"...)
	out := append([]byte{}, wasm...)
	out = append(out, 0)
	out = binary.AppendUvarint(out, uint64(len(payload)))
	return append(out, payload...)
}

// testRegistry is an in-process registry; wrap, if not nil, sits in front of it.
func testRegistry(t testing.TB, wrap func(http.Handler) http.Handler) (host string, srv *httptest.Server) {
	t.Helper()
	h := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	if wrap != nil {
		h = wrap(h)
	}
	srv = httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://"), srv
}

func push(t testing.TB, opts oci.Options, ref string, wasm []byte) *oci.Artifact {
	t.Helper()
	opts.PlainHTTP = true
	c, err := oci.NewClient(opts)
	if err != nil {
		t.Fatal(err)
	}
	a, err := c.Push(context.Background(), ref, wasm, nil)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// memory returns the Go heap in use after a collection and the process's resident set, in bytes.
func memory(t testing.TB) (heap, rss uint64) {
	heap, rss, _ = memoryDetail(t)
	return heap, rss
}

// memoryDetail also returns the anonymous part of the resident set (RssAnon: heap, machine code), which
// unlike file-backed pages (the binary's embedded plugins once read) the kernel cannot drop.
func memoryDetail(t testing.TB) (heap, rss, anon uint64) {
	goruntime.GC()
	var ms goruntime.MemStats
	goruntime.ReadMemStats(&ms)
	f, err := os.Open("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		for key, into := range map[string]*uint64{"VmRSS:": &rss, "RssAnon:": &anon} {
			if v, ok := strings.CutPrefix(sc.Text(), key); ok {
				kb, _ := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
				*into = kb << 10
			}
		}
	}
	return ms.HeapInuse, rss, anon
}

// TestLoadedModulesAreBounded replays the memory exhaustion: profiles referring to many distinct plugin
// digests, each rendered (or validated) in turn. The number of loaded modules never exceeds the bound,
// every render works, and memory stays flat once the bound is reached.
func TestLoadedModulesAreBounded(t *testing.T) {
	const bound = 3
	// 16 digests, five times the bound: a module leaked per unload (~30 MiB of machine code and decoded
	// module) would show as hundreds of MiB by the end.
	digests := 16
	if testing.Short() {
		// A cold compile of a test plugin takes ~30 s under the race detector; the disk cache makes later runs fast.
		digests = bound + 3
	}
	host, _ := testRegistry(t, nil)
	healthy := testPlugin(t, "healthy")
	var refs []string
	for i := range digests {
		refs = append(refs, push(t, oci.Options{}, fmt.Sprintf("%s/osm/p%d:1", host, i), withCustomSection(healthy, fmt.Sprint("osm-test-", i))).Reference)
	}
	m, reg, _ := newManager(t, Config{MaxLoadedModules: bound, Registry: RegistryConfig{PlainHTTP: true}}, nil)
	ctx := WaitForPulls(context.Background())
	var heap0, rss0 uint64
	for i, ref := range refs {
		start := time.Now()
		p, err := m.Resolve(ctx, Reference{Image: ref})
		if err != nil {
			t.Fatalf("profile %d: %v", i, err)
		}
		if _, err := p.Render(ctx, renderRequest()); err != nil {
			t.Fatalf("render %d: %v", i, err)
		}
		if n := m.Loaded(); n > bound {
			t.Fatalf("after %d digests %d modules are loaded, bound %d", i+1, n, bound)
		}
		if i == bound {
			heap0, rss0 = memory(t)
		}
		t.Logf("digest %d: %s", i, time.Since(start))
	}
	heap1, rss1 := memory(t)
	t.Logf("after the bound was reached: heap %d -> %d MiB, RSS %d -> %d MiB", heap0>>20, heap1>>20, rss0>>20, rss1>>20)
	if heap1 > heap0+64<<20 || rss1 > rss0+256<<20 {
		t.Errorf("memory grew with the number of digests: heap %d -> %d MiB, RSS %d -> %d MiB", heap0>>20, heap1>>20, rss0>>20, rss1>>20)
	}
	if got, _ := reg.Gather(); len(got) == 0 {
		t.Error("no metrics")
	}
	if got := int(gathered(t, reg, "osm_plugin_loaded_modules")); got > bound {
		t.Errorf("loaded gauge = %d", got)
	}
}

// gathered returns the value of the unlabelled gauge or counter name in reg.
func gathered(t *testing.T, reg prometheus.Gatherer, name string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name || len(f.GetMetric()) != 1 {
			continue
		}
		if g := f.GetMetric()[0].GetGauge(); g != nil {
			return g.GetValue()
		}
		return f.GetMetric()[0].GetCounter().GetValue()
	}
	t.Fatalf("no metric %s", name)
	return 0
}
