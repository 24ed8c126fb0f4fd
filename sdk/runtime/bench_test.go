package runtime_test

import (
	"context"
	"fmt"
	"os"
	"runtime/debug"
	"slices"
	"testing"
	"time"

	"github.com/osmhq/osm/sdk/abi"
	"github.com/osmhq/osm/sdk/runtime"
)

// The benchmarks use the healthy test plugin, a 3.4 MB Go module like the default OS plugins.
//
//	go test -run '^$' -bench . -count 5 ./runtime

// BenchmarkCompileCold compiles the module with an empty cache: a controller's first start.
func BenchmarkCompileCold(b *testing.B) {
	for _, workers := range []int{1, 2} {
		b.Run(fmt.Sprintf("workers=%d", workers), func(b *testing.B) {
			wasm := testPlugin(b, "healthy")
			for b.Loop() {
				rt, err := runtime.New(runtime.Config{CacheDir: b.TempDir(), CompileWorkers: workers})
				if err != nil {
					b.Fatal(err)
				}
				if _, err := rt.Load(context.Background(), "healthy", wasm); err != nil {
					b.Fatal(err)
				}
				rt.Close(context.Background())
			}
		})
	}
}

// BenchmarkRestartReady is a controller restart with a warm disk cache: a new runtime loads the module
// (compile from disk, metadata read and validated) and renders once.
func BenchmarkRestartReady(b *testing.B) {
	wasm := testPlugin(b, "healthy")
	dir := b.TempDir()
	warm, err := runtime.New(runtime.Config{CacheDir: dir})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := warm.Load(context.Background(), "healthy", wasm); err != nil {
		b.Fatal(err)
	}
	warm.Close(context.Background())
	req := benchRequest()
	for b.Loop() {
		rt, err := runtime.New(runtime.Config{CacheDir: dir})
		if err != nil {
			b.Fatal(err)
		}
		m, err := rt.Load(context.Background(), "healthy", wasm)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := m.Render(context.Background(), req); err != nil {
			b.Fatal(err)
		}
		rt.Close(context.Background())
	}
}

// BenchmarkRender is one render, the steady state of the controller: a fresh instance (instantiation, the Go
// runtime's start-up in the guest), the call and the instance's release, for a small request (one file,
// ~0.4 KB of JSON) and a realistic one (40 files and units, ~6.6 KB).
func BenchmarkRender(b *testing.B) {
	m := load(b, newRuntime(b, runtime.Config{}), "healthy")
	for _, bc := range []struct {
		name string
		m    *runtime.Module
		req  *abi.RenderRequest
	}{{"small", m, renderRequest()}, {"realistic", m, benchRequest()}} {
		b.Run(bc.name, func(b *testing.B) {
			var lat []time.Duration
			for b.Loop() {
				start := time.Now()
				if _, err := bc.m.Render(context.Background(), bc.req); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(start))
			}
			reportPercentiles(b, lat)
		})
	}
}

// BenchmarkModuleMemory is what a loaded module costs the process (compiled code, metadata) and what is left
// after renders (every instance is closed with its call): resident memory growth per module, in MiB.
func BenchmarkModuleMemory(b *testing.B) {
	wasm := testPlugin(b, "healthy")
	dir := b.TempDir()
	for b.Loop() {
		debug.FreeOSMemory() // return freed heap, so resident memory is what is live
		before := rssBytes(b)
		rt, err := runtime.New(runtime.Config{CacheDir: dir})
		if err != nil {
			b.Fatal(err)
		}
		m, err := rt.Load(context.Background(), "healthy", wasm)
		if err != nil {
			b.Fatal(err)
		}
		debug.FreeOSMemory() // return freed heap, so resident memory is what is live
		loaded := rssBytes(b)
		for range 20 {
			if _, err := m.Render(context.Background(), benchRequest()); err != nil {
				b.Fatal(err)
			}
		}
		debug.FreeOSMemory() // return freed heap, so resident memory is what is live
		rendered := rssBytes(b)
		b.ReportMetric(float64(loaded-before)/(1<<20), "loaded-MiB")
		b.ReportMetric(float64(rendered-before)/(1<<20), "after-renders-MiB")
		rt.Close(context.Background())
	}
}

func rssBytes(b *testing.B) int64 {
	f, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		b.Fatal(err)
	}
	var size, resident int64
	if _, err := fmt.Sscan(string(f), &size, &resident); err != nil {
		b.Fatal(err)
	}
	return resident * int64(os.Getpagesize())
}

// BenchmarkRenderParallel measures render throughput with one goroutine per core.
func BenchmarkRenderParallel(b *testing.B) {
	m := load(b, newRuntime(b, runtime.Config{}), "healthy")
	req := benchRequest()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := m.Render(context.Background(), req); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// reportPercentiles adds p50 and p99 call latencies (µs) to the benchmark's output: the target is stated as
// a median, and ns/op is a mean.
func reportPercentiles(b *testing.B, lat []time.Duration) {
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
}

// benchRequest is a render request of realistic size: ~40 files and units of template output.
func benchRequest() *abi.RenderRequest {
	req := renderRequest()
	for i := range 30 {
		req.Input.Files = append(req.Input.Files, abi.PlainFile(fmt.Sprintf("/etc/osm/file-%d.conf", i), 0o644,
			fmt.Sprintf("# generated\nkey-%d = value\nanother = setting with some text to make it realistic\n", i)))
	}
	for i := range 10 {
		content := fmt.Sprintf("[Unit]\nDescription=unit %d\n[Service]\nExecStart=/usr/bin/true\n", i)
		req.Input.Units = append(req.Input.Units, abi.Unit{Name: fmt.Sprintf("unit-%d.service", i), Content: &content})
	}
	return req
}
