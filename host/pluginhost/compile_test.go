package pluginhost_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/osmhq/osm/host/pluginhost"
	"github.com/osmhq/osm/sdk/abi"
	"github.com/osmhq/osm/sdk/runtime"
	"github.com/osmhq/osm/sdk/wasmtest"
)

// TestATamperedCacheNeverRunsOtherCode: module A's compiled code in the cache is replaced by module B's (same
// shape, other code and output), A's digest unchanged. Loaded without the check (the control below), the
// cache makes A render B's output; through the supervisor, A renders its own: the supervisor finds the file
// differs from the digest it recorded when A's compile process wrote it, and compiles A again.
func TestATamperedCacheNeverRunsOtherCode(t *testing.T) {
	reg := prometheus.NewRegistry()
	cache := t.TempDir()
	s := newSupervisor(t, func(c *pluginhost.Config) { c.Host.CacheDir = cache; c.Registerer = reg })
	ctx := context.Background()
	a, b := module("a", wasmtest.Plugin(nil, wasmtest.Output(5), 1)), module("b", wasmtest.Plugin(nil, wasmtest.Output(9), 1))
	render := func(m pluginhost.Module) []byte {
		t.Helper()
		out, err := s.Call(ctx, m, abi.ExportRender, nil)
		if err != nil {
			t.Fatalf("%s: %v", m.Name, err)
		}
		return out
	}
	outA, outB := render(a), render(b)
	if bytes.Equal(outA, outB) {
		t.Fatalf("A and B both render %q: the test proves nothing", outA)
	}
	for _, m := range []pluginhost.Module{a, b} {
		s.Unload(m.Digest)
		waitFor(t, m.Name+"'s host to stop", func() bool { return s.HostPID(m) == 0 })
	}
	dirA := filepath.Join(cache, "tenants", strings.TrimPrefix(a.Digest, "sha256:"))
	fileA, fileB := ownEntry(t, dirA, filepath.Join(cache, "tenants", strings.TrimPrefix(b.Digest, "sha256:")))
	code, err := os.ReadFile(fileB)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(fileA, code, 0o600); err != nil {
		t.Fatal(err)
	}

	// The control: a runtime that reads this cache as it is runs B's code for A.
	rt, err := runtime.New(runtime.Config{CacheDir: dirA, NoSnapshot: true, ReadOnlyCache: true, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	mod, err := rt.Load(ctx, "a", mustBytes(t, a))
	if err != nil {
		t.Fatal(err)
	}
	if out, err := mod.Call(ctx, abi.ExportRender, nil); err != nil || !bytes.Equal(out, outB) {
		t.Fatalf("control: A from the tampered cache rendered %q, %v; want B's %q (else the tamper is not one)", out, err, outB)
	}
	_ = rt.Close(ctx)

	compiles := counter(t, reg, "osm_plugin_host_starts_total", "compile")
	out, err := s.Call(ctx, a, abi.ExportRender, nil)
	if err != nil {
		t.Fatalf("A after the tamper: %v", err)
	}
	if !bytes.Equal(out, outA) {
		t.Fatalf("A after the tamper rendered %q, want its own %q (B's is %q)", out, outA, outB)
	}
	if n := counter(t, reg, "osm_plugin_host_starts_total", "compile") - compiles; n != 1 {
		t.Errorf("%v compile processes after the tamper, want 1 (A compiled again)", n)
	}
}

// ownEntry returns the machine code files of the module in dirA and of the one in dirB: the wazero cache
// entry each has and the other lacks (both have the Extism kernel's).
func ownEntry(t *testing.T, dirA, dirB string) (string, string) {
	t.Helper()
	entries := func(dir string) map[string]string {
		files, err := filepath.Glob(filepath.Join(dir, "wazero-*", "*"))
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]string{}
		for _, f := range files {
			m[filepath.Base(f)] = f
		}
		return m
	}
	ea, eb := entries(dirA), entries(dirB)
	var onlyA, onlyB []string
	for k, f := range ea {
		if eb[k] == "" {
			onlyA = append(onlyA, f)
		}
	}
	for k, f := range eb {
		if ea[k] == "" {
			onlyB = append(onlyB, f)
		}
	}
	if len(onlyA) != 1 || len(onlyB) != 1 {
		t.Fatalf("cache entries of A only %v, of B only %v: want one each", onlyA, onlyB)
	}
	return onlyA[0], onlyB[0]
}

func mustBytes(t *testing.T, m pluginhost.Module) []byte {
	t.Helper()
	b, _, err := m.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// compileBomb is a module that passes every structural check and that wazero takes minutes and gigabytes
// to compile: nested blocks, and as many branch tables inside them, each to every block (a square number of
// edges; 1000 of each took 54 s and 2.3 GiB here).
func compileBomb(depth int) []byte {
	var b bytes.Buffer
	for range depth {
		b.Write([]byte{0x02, 0x40}) // block
	}
	for range depth {
		b.Write([]byte{0x20, 0x01, 0x04, 0x40, 0x41, 0x00, 0x0e}) // local.get 1; if; i32.const 0; br_table
		b.Write(binary.AppendUvarint(nil, uint64(depth)))
		for i := range depth {
			b.Write(binary.AppendUvarint(nil, uint64(i+1)))
		}
		b.Write(binary.AppendUvarint(nil, 1))
		b.WriteByte(0x0b) // end if
	}
	for range depth {
		b.WriteByte(0x0b)
	}
	b.Write([]byte{0x41, 0x00})
	return wasmtest.Plugin(nil, b.Bytes(), 1)
}

// TestACompileBombCostsOnlyItsModule: a module that takes wazero minutes and gigabytes to compile is killed
// in its compile process, which no host shares: no host ever starts for it, a built-in and another
// tenant's module load and render meanwhile and after, and its second kill quarantines it.
func TestACompileBombCostsOnlyItsModule(t *testing.T) {
	reg := prometheus.NewRegistry()
	s := newSupervisor(t, func(c *pluginhost.Config) {
		c.MaxRSS = 256 << 20
		c.LoadTimeout = 20 * time.Second
		c.Registerer = reg
	})
	ctx := context.Background()
	bomb := module("bomb", compileBomb(1000))
	benign := module("benign", wasmtest.Plugin(nil, wasmtest.Output(5), 1))
	builtin := module("builtin", wasmtest.Plugin(nil, wasmtest.Output(7), 2))
	builtin.Builtin = true
	bombed := make(chan error, 1)
	go func() {
		_, err := s.Load(ctx, bomb)
		bombed <- err
	}()
	for _, m := range []pluginhost.Module{benign, builtin} {
		if _, err := s.Call(ctx, m, abi.ExportRender, nil); err != nil {
			t.Errorf("%s beside the compile bomb: %v", m.Name, err)
		}
	}
	for i := range 2 {
		err := <-bombed
		if r := reasonOf(err); (r != runtime.ReasonOutOfMemory && r != runtime.ReasonTimeout) || !strings.Contains(err.Error(), "plugin compiler") {
			t.Fatalf("compile bomb, attempt %d: %v; want its compile process killed", i+1, err)
		}
		if pid := s.HostPID(bomb); pid != 0 {
			t.Errorf("the compile bomb has a host (%d): no host may start for a module that did not compile", pid)
		}
		if i == 0 {
			go func() {
				_, err := s.Load(ctx, bomb)
				bombed <- err
			}()
		}
	}
	if _, err := s.Load(ctx, bomb); reasonOf(err) != pluginhost.ReasonQuarantined {
		t.Errorf("compile bomb after two kills: %v, want Quarantined", err)
	}
	for _, m := range []pluginhost.Module{benign, builtin} {
		if _, err := s.Call(ctx, m, abi.ExportRender, nil); err != nil {
			t.Errorf("%s after the compile bomb: %v", m.Name, err)
		}
	}
	if n := counter(t, reg, "osm_plugin_host_deaths_total", "OutOfMemory") + counter(t, reg, "osm_plugin_host_deaths_total", "Timeout"); n != 2 {
		t.Errorf("%v processes killed, want the compile bomb's two compile processes", n)
	}
}

// TestATamperedPrecompiledCacheNeverRunsOtherCode: the built-ins' code as the build precompiles it
// (Precompile, with its manifest of digests) seeds a controller's cache; module A's entry there is replaced by
// B's machine code. The control shows the tamper works on a runtime that reads the cache unchecked; the
// built-in host, given the build's digests, ignores the cache and renders A's own output.
func TestATamperedPrecompiledCacheNeverRunsOtherCode(t *testing.T) {
	ctx := context.Background()
	a, b := module("a", wasmtest.Plugin(nil, wasmtest.Output(5), 1)), module("b", wasmtest.Plugin(nil, wasmtest.Output(9), 1))
	a.Builtin, b.Builtin = true, true
	src, built := t.TempDir(), t.TempDir()
	var files []string
	for _, m := range []pluginhost.Module{a, b} {
		f := filepath.Join(src, m.Name+".wasm")
		if err := os.WriteFile(f, mustBytes(t, m), 0o600); err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	if err := pluginhost.Precompile(ctx, pluginhost.HostConfig{CacheDir: built}, files); err != nil {
		t.Fatal(err)
	}
	// Each module alone, to tell its entry from the other's.
	alone := map[string]string{}
	for i, m := range []pluginhost.Module{a, b} {
		alone[m.Name] = t.TempDir()
		if err := pluginhost.Precompile(ctx, pluginhost.HostConfig{CacheDir: alone[m.Name]}, files[i:i+1]); err != nil {
			t.Fatal(err)
		}
	}
	entryA, entryB := ownEntry(t, alone["a"], alone["b"])
	arts, err := pluginhost.ReadArtifacts(built)
	if err != nil || len(arts) == 0 {
		t.Fatalf("the build's manifest: %v, %v", arts, err)
	}
	cache := t.TempDir()
	if _, err := pluginhost.SeedBuiltins(cache, built); err != nil {
		t.Fatal(err)
	}
	seededA := filepath.Join(pluginhost.BuiltinDir(cache), filepath.Base(filepath.Dir(entryA)), filepath.Base(entryA))
	code, err := os.ReadFile(entryB)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(seededA); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(seededA, code, 0o600); err != nil {
		t.Fatal(err)
	}

	rt, err := runtime.New(runtime.Config{CacheDir: pluginhost.BuiltinDir(cache), ReadOnlyCache: true, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	mod, err := rt.Load(ctx, "a", mustBytes(t, a))
	if err != nil {
		t.Fatal(err)
	}
	control, err := mod.Call(ctx, abi.ExportRender, nil)
	_ = rt.Close(ctx)
	s := newSupervisor(t, func(c *pluginhost.Config) { c.Host.CacheDir, c.Host.Artifacts = cache, arts })
	outB, err2 := s.Call(ctx, b, abi.ExportRender, nil)
	if err != nil || err2 != nil || !bytes.Equal(control, outB) {
		t.Fatalf("control: A from the tampered cache rendered %q, %v; want B's %q, %v (else the tamper is not one)", control, err, outB, err2)
	}
	out, err := s.Call(ctx, a, abi.ExportRender, nil)
	if err != nil {
		t.Fatalf("A after the tamper: %v", err)
	}
	if len(out) != 5 || bytes.Equal(out, outB) {
		t.Fatalf("A after the tamper rendered %q, want its own 5 bytes (B's are %q)", out, outB)
	}
}

// TestAHostCompilesWhatItsCacheLacksInMemory: a tenant's module whose machine code left its cache after its
// compile process wrote it (a missing file is no mismatch) still runs: its host, which Landlock keeps from
// writing the cache, compiles it in its own memory, and the cache stays as it was.
func TestAHostCompilesWhatItsCacheLacksInMemory(t *testing.T) {
	cache := t.TempDir()
	s := newSupervisor(t, func(c *pluginhost.Config) { c.Host.CacheDir = cache })
	ctx := context.Background()
	a, b := module("a", wasmtest.Plugin(nil, wasmtest.Output(5), 1)), module("b", wasmtest.Plugin(nil, wasmtest.Output(9), 1))
	for _, m := range []pluginhost.Module{a, b} {
		if _, err := s.Load(ctx, m); err != nil {
			t.Fatal(err)
		}
		s.Unload(m.Digest)
		waitFor(t, m.Name+"'s host to stop", func() bool { return s.HostPID(m) == 0 })
	}
	dirA := filepath.Join(cache, "tenants", strings.TrimPrefix(a.Digest, "sha256:"))
	entryA, _ := ownEntry(t, dirA, filepath.Join(cache, "tenants", strings.TrimPrefix(b.Digest, "sha256:")))
	if err := os.Remove(entryA); err != nil {
		t.Fatal(err)
	}
	out, err := s.Call(ctx, a, abi.ExportRender, nil)
	if err != nil || len(out) != 5 {
		t.Fatalf("A without its cached code: %q, %v; want its 5 bytes", out, err)
	}
	if _, err := os.Stat(entryA); !os.IsNotExist(err) {
		t.Errorf("A's host wrote its cache (%s: %v)", entryA, err)
	}
}

// TestARestartedControllerReusesWhatItCompiled: a tenant's module compiled by one supervisor is not compiled
// again by the next one on the same cache (a restarted controller, or another test process), as long as its
// cache directory holds exactly what the record says; once a file there changes, the next supervisor compiles
// it again and the module renders its own output.
func TestARestartedControllerReusesWhatItCompiled(t *testing.T) {
	cache := t.TempDir()
	ctx := context.Background()
	a, b := module("a", wasmtest.Plugin(nil, wasmtest.Output(5), 1)), module("b", wasmtest.Plugin(nil, wasmtest.Output(9), 1))
	start := func() (*pluginhost.Supervisor, *prometheus.Registry) {
		reg := prometheus.NewRegistry()
		return newSupervisor(t, func(c *pluginhost.Config) { c.Host.CacheDir = cache; c.Registerer = reg }), reg
	}
	render := func(s *pluginhost.Supervisor, m pluginhost.Module) []byte {
		t.Helper()
		out, err := s.Call(ctx, m, abi.ExportRender, nil)
		if err != nil {
			t.Fatalf("%s: %v", m.Name, err)
		}
		return out
	}
	first, reg := start()
	outA, outB := render(first, a), render(first, b)
	if n := counter(t, reg, "osm_plugin_host_starts_total", "compile"); n != 2 {
		t.Fatalf("%v compile processes for two new modules, want 2", n)
	}

	second, reg := start()
	if out := render(second, a); !bytes.Equal(out, outA) {
		t.Fatalf("A on the next supervisor rendered %q, want %q", out, outA)
	}
	if n := counter(t, reg, "osm_plugin_host_starts_total", "compile"); n != 0 {
		t.Errorf("the next supervisor ran %v compile processes for a module compiled and recorded before, want 0", n)
	}

	for _, s := range []*pluginhost.Supervisor{first, second} {
		s.Unload(a.Digest)
		waitFor(t, "A's host to stop", func() bool { return s.HostPID(a) == 0 })
	}
	fileA, fileB := ownEntry(t, filepath.Join(cache, "tenants", strings.TrimPrefix(a.Digest, "sha256:")),
		filepath.Join(cache, "tenants", strings.TrimPrefix(b.Digest, "sha256:")))
	code, err := os.ReadFile(fileB)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(fileA, code, 0o600); err != nil {
		t.Fatal(err)
	}
	third, reg := start()
	if out := render(third, a); !bytes.Equal(out, outA) {
		t.Fatalf("A after its cached code was replaced by B's rendered %q, want its own %q (B's is %q)", out, outA, outB)
	}
	if n := counter(t, reg, "osm_plugin_host_starts_total", "compile"); n != 1 {
		t.Errorf("%v compile processes for a module whose cached code changed since its record, want 1", n)
	}
}
