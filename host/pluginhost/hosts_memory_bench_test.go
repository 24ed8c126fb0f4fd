package pluginhost_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/osmhq/osm/host/pluginhost"
	"github.com/osmhq/osm/sdk/abi"
)

// BenchmarkTenantHostsMemory measures what live tenants' hosts cost in memory: n tenants' modules (the
// default ubuntu plugin, each made a module of its own by a custom section, as a tenant would mint digests),
// each loaded in its own host with an instance made (a metadata call, as a render makes one), then the hosts'
// resident memory summed (VmRSS from /proc). hosts-MiB is the sum, per-host-MiB the mean; the controller's
// own memory is not in it. The modules are compiled once (compile processes) into a cache shared by the
// sizes, so the figures are of hosts loading from the cache, as after a controller's first start.
//
//	go test ./host/pluginhost -run '^$' -bench BenchmarkTenantHostsMemory -benchtime 1x
func BenchmarkTenantHostsMemory(b *testing.B) {
	wasm, err := os.ReadFile(filepath.Join("..", "..", "plugins", "dist", "ubuntu.wasm"))
	if err != nil {
		b.Skipf("no default plugin (make plugins): %v", err)
	}
	cache := b.TempDir()
	ctx := context.Background()
	for _, n := range []int{1, 4, 8} {
		b.Run(fmt.Sprintf("hosts=%d", n), func(b *testing.B) {
			var total float64
			for range b.N {
				s, err := pluginhost.New(pluginhost.Config{Host: pluginhost.HostConfig{CacheDir: cache}, IdleTimeout: -1, MaxHosts: 8})
				if err != nil {
					b.Fatal(err)
				}
				var sum float64
				for i := range n {
					m := module(fmt.Sprintf("tenant-%d", i), withCustomSection(wasm, "osm-bench", strconv.Itoa(i)))
					if _, err := s.Call(ctx, m, abi.ExportMetadata, nil); err != nil {
						b.Fatal(err)
					}
				}
				for i := range n {
					m := module(fmt.Sprintf("tenant-%d", i), withCustomSection(wasm, "osm-bench", strconv.Itoa(i)))
					sum += vmRSSMiB(b, s.HostPID(m))
				}
				s.Close()
				total += sum
			}
			b.ReportMetric(total/float64(b.N), "hosts-MiB")
			b.ReportMetric(total/float64(b.N)/float64(n), "per-host-MiB")
		})
	}
}

// withCustomSection returns wasm with a custom section appended: another module digest, the same code.
func withCustomSection(wasm []byte, name, payload string) []byte {
	body := append(uleb(uint32(len(name))), name...)
	body = append(body, payload...)
	out := append([]byte{}, wasm...)
	out = append(out, 0)
	out = append(out, uleb(uint32(len(body)))...)
	return append(out, body...)
}

func uleb(v uint32) []byte {
	var out []byte
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if v != 0 {
			out = append(out, c|0x80)
			continue
		}
		return append(out, c)
	}
}

// vmRSSMiB is the resident memory of process pid.
func vmRSSMiB(b *testing.B, pid int) float64 {
	b.Helper()
	if pid == 0 {
		b.Fatal("the host is not running")
	}
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kib, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			if err != nil {
				b.Fatal(err)
			}
			return kib / 1024
		}
	}
	b.Fatalf("no VmRSS for %d", pid)
	return 0
}
