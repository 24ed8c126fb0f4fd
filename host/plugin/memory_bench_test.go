package plugin

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/osmhq/osm/plugins"
)

// BenchmarkBuiltinMemory measures what the six built-in plugins cost a controller. Run each case in a
// process of its own, since resident memory only grows:
//
//	go test -run '^$' -bench 'BuiltinMemory/identify$' -benchtime 1x ./host/plugin
//	go test -run '^$' -bench 'BuiltinMemory/identify-render-one$' -benchtime 1x ./host/plugin
//	go test -run '^$' -bench 'BuiltinMemory/load-all$' -benchtime 1x ./host/plugin
//
// The plugin host is this test binary (no osm-plugin-host lies beside it), so its figures include the test's
// libraries: compare them between runs, not with the dedicated host's in production.
//
// identify is what the default profiles cost now (status and hashes of all six); identify-render-one adds
// one MachineDeployment's render; load-all is what resolving the six default profiles cost before, when
// resolution compiled and instantiated every plugin. The RSS and heap deltas are taken after a GC, from the
// same process before the manager was created.
func BenchmarkBuiltinMemory(b *testing.B) {
	cases := []struct {
		name   string
		render int // how many plugins render
	}{
		{"identify", 0},
		{"identify-render-one", 1},
		{"load-all", 6},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				heap0, rss0, anon0 := memoryDetail(b)
				m, err := New(Config{CacheDir: sharedCache(b)}, plugins.Builtin(), prometheus.NewRegistry(), logr.Discard())
				if err != nil {
					b.Fatal(err)
				}
				names, err := m.BuiltinNames()
				if err != nil || len(names) != 6 {
					b.Fatalf("built-ins %v, %v; run hack/build-plugins.sh", names, err)
				}
				for i, name := range names {
					if _, err := m.Identify(Reference{Builtin: name}); err != nil {
						b.Fatal(err)
					}
					if i >= c.render {
						continue
					}
					p, err := m.Resolve(context.Background(), Reference{Builtin: name})
					if err != nil {
						b.Fatal(err)
					}
					// A real OS plugin may refuse this bare request; the call still instantiated it.
					_, _ = p.Render(context.Background(), renderRequest())
				}
				heap1, rss1, anon1 := memoryDetail(b)
				b.ReportMetric(float64(int64(rss1)-int64(rss0))/(1<<20), "RSS-delta-MiB")
				b.ReportMetric(float64(int64(anon1)-int64(anon0))/(1<<20), "RssAnon-delta-MiB")
				b.ReportMetric(float64(int64(heap1)-int64(heap0))/(1<<20), "heap-delta-MiB")
				b.ReportMetric(float64(rss1)/(1<<20), "RSS-MiB")
				b.ReportMetric(float64(m.Loaded()), "loaded")
				var hostHWM, hostRSS uint64
				for _, pid := range m.HostPIDs() {
					hostHWM += procStatusBytes(b, pid, "VmHWM:")
					hostRSS += procStatusBytes(b, pid, "VmRSS:")
				}
				b.ReportMetric(float64(hostHWM)/(1<<20), "host-HWM-MiB")
				b.ReportMetric(float64(hostRSS)/(1<<20), "host-RSS-MiB")
				_ = m.Close(context.Background())
			}
		})
	}
}

// procStatusBytes reads a field of /proc/<pid>/status given in kB (VmHWM:, VmRSS:), in bytes.
func procStatusBytes(t testing.TB, pid int, key string) uint64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, key); ok {
			kb, _ := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}
