package plugins_test

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/osmhq/osm/host/plugin"
	"github.com/osmhq/osm/plugins/pluginstest"
	"github.com/osmhq/osm/sdk/abi"
	"github.com/osmhq/osm/sdk/runtime"
)

// BenchmarkProcessBoundary renders the Ubuntu plugin's provisioning request of one MachineDeployment two
// ways: in this process on sdk/runtime, as the controller did before plugins moved out, and through the
// plugin manager, which sends it to the plugin host
// process and decodes the answer. The difference is what the process boundary costs a render: the JSON
// encode and decode on the controller's side, the pipe, and the host's scheduling.
func BenchmarkProcessBoundary(b *testing.B) {
	src := ubuntuProvisioningRequest(b)
	ctx := context.Background()
	req := *src.last // the provisioning stage, rendered last
	md := src.p.Metadata()
	var err error
	if req.Config, err = md.ApplyConfig(nil); err != nil { // what the manager sends: the schema's defaults
		b.Fatal(err)
	}

	// Every iteration's request differs by one small file, so no layer can answer it from a cache of outputs.
	files := req.Input.Files
	i := 0
	distinct := func() *abi.RenderRequest {
		i++
		r := req
		r.Input.Files = append(files[:len(files):len(files)], abi.File{Path: fmt.Sprintf("/etc/osm-bench/%d", i),
			Content: abi.FileContent{Inline: &abi.FileContentInline{Data: "x"}}})
		return &r
	}

	b.Run("in-process", func(b *testing.B) {
		wasm, err := fs.ReadFile(dist(b), "ubuntu.wasm")
		if err != nil {
			b.Fatal(err)
		}
		rt, err := runtime.New(runtime.Config{CacheDir: pluginstest.CacheDir(b)})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = rt.Close(context.Background()) })
		mod, err := rt.Load(ctx, "ubuntu", wasm)
		if err != nil {
			b.Fatal(err)
		}
		cpu := startCPU(nil)
		for b.Loop() {
			if _, err := mod.Render(ctx, distinct()); err != nil {
				b.Fatal(err)
			}
		}
		cpu.report(b)
	})
	b.Run("plugin-host", func(b *testing.B) {
		hosts := src.inner.(*plugin.Resolver).Manager.HostPIDs
		cpu := startCPU(hosts)
		for b.Loop() {
			if _, err := src.p.Render(ctx, distinct()); err != nil {
				b.Fatal(err)
			}
		}
		cpu.report(b)
	})
}

// cpuMeter measures the CPU time of this process and of the plugin hosts, which wall time on a shared
// machine does not show apart from other load.
type cpuMeter struct {
	hosts func() []int
	start time.Duration
}

func startCPU(hosts func() []int) *cpuMeter {
	m := &cpuMeter{hosts: hosts}
	m.start = m.now()
	return m
}

func (m *cpuMeter) now() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	d := time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	if m.hosts != nil {
		for _, pid := range m.hosts() {
			d += procCPU(pid)
		}
	}
	return d
}

func (m *cpuMeter) report(b *testing.B) {
	b.ReportMetric(float64(m.now()-m.start)/float64(b.N), "cpu-ns/op")
}

// procCPU is a process's user and system time from /proc (clock ticks of 10 ms).
func procCPU(pid int) time.Duration {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+2:]))
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * 10 * time.Millisecond
}
