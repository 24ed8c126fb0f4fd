package pluginhost_test

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/osmhq/osm/host/pluginhost"
	"github.com/osmhq/osm/sdk/abi"
)

// BenchmarkTenantStart measures what compiling apart costs a tenant's module (the default ubuntu plugin, as
// a tenant would pull it): "cold" is its first load in a new supervisor with an empty cache (a compile
// process, then the host), "warm" a host started again from the cache the compile process filled (the
// supervisor's and the host's digest checks, then the load from disk). compile-cpu-ms is the compile
// process's CPU time, hosts-cpu-ms that of every process the supervisor started (reaped ones only).
//
//	go test ./host/pluginhost -run '^$' -bench BenchmarkTenantStart -benchtime 3x
func BenchmarkTenantStart(b *testing.B) {
	wasm, err := os.ReadFile(filepath.Join("..", "..", "plugins", "dist", "ubuntu.wasm"))
	if err != nil {
		b.Skipf("no default plugin (make plugins): %v", err)
	}
	m := module("ubuntu-as-tenant", wasm)
	ctx := context.Background()
	b.Run("cold", func(b *testing.B) {
		var compileCPU, children time.Duration
		for range b.N {
			reg := prometheus.NewRegistry()
			before := childrenCPU()
			s, err := pluginhost.New(pluginhost.Config{Host: pluginhost.HostConfig{CacheDir: b.TempDir()}, IdleTimeout: -1, Registerer: reg})
			if err != nil {
				b.Fatal(err)
			}
			if _, err := s.Load(ctx, m); err != nil {
				b.Fatal(err)
			}
			s.Close()
			compileCPU += time.Duration(counter(b, reg, "osm_plugin_compile_cpu_seconds_total", "") * float64(time.Second))
			children += childrenCPU() - before
		}
		b.ReportMetric(float64(compileCPU.Milliseconds())/float64(b.N), "compile-cpu-ms")
		b.ReportMetric(float64(children.Milliseconds())/float64(b.N), "hosts-cpu-ms")
	})
	b.Run("warm", func(b *testing.B) {
		s, err := pluginhost.New(pluginhost.Config{Host: pluginhost.HostConfig{CacheDir: b.TempDir()}, IdleTimeout: -1})
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		if _, err := s.Load(ctx, m); err != nil {
			b.Fatal(err)
		}
		var children time.Duration
		b.ResetTimer()
		for range b.N {
			s.Unload(m.Digest) // stops its host, and returns once it ended
			if s.HostPID(m) != 0 {
				b.Fatal("Unload left the module's host running")
			}
			before := childrenCPU()
			if _, err := s.Load(ctx, m); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			s.Unload(m.Digest)
			if s.HostPID(m) != 0 {
				b.Fatal("Unload left the module's host running")
			}
			children += childrenCPU() - before
			b.StartTimer()
		}
		b.ReportMetric(float64(children.Milliseconds())/float64(b.N), "hosts-cpu-ms")
	})
	// A render's instance initialises itself in a tenant's host (compiled as built, not snapshotted) and
	// starts from the snapshot in the built-in host.
	for _, builtin := range []bool{false, true} {
		name := "call-tenant"
		if builtin {
			name = "call-builtin"
		}
		b.Run(name, func(b *testing.B) {
			s, err := pluginhost.New(pluginhost.Config{Host: pluginhost.HostConfig{CacheDir: b.TempDir()}, IdleTimeout: -1})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			mm := m
			mm.Builtin = builtin
			if _, err := s.Load(ctx, mm); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for range b.N {
				// Metadata: an instance is made for it as for a render, with no input to build.
				if _, err := s.Call(ctx, mm, abi.ExportMetadata, nil); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func childrenCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
