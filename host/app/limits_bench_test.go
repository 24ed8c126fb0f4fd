package app_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// make bench-limits runs BenchmarkCompare as a new pod starts under upstream's Deployment limits (cpu 100m,
// memory 256Mi, deploy/operating-system-manager.yaml of upstream v1.11.2): each controller, with its whole process
// tree, in a cgroup v1 of its own with OSM_BENCH_CGROUP=cpu=<millicores>,memory=<MiB>, and with
// OSM_BENCH_EMPTY_CACHE=1 our plugin cache empty at every run (an emptyDir), the precompiled default plugins
// beside the binary as the image ships them. It needs root and writable cgroup v1 cpu and memory hierarchies.

// emptyCache reports whether every run of ours starts with an empty plugin cache.
func emptyCache() bool { return os.Getenv("OSM_BENCH_EMPTY_CACHE") != "" }

func emptyCacheDir(b *testing.B) string {
	b.Helper()
	dir, err := os.MkdirTemp("", "osm-bench-empty-cache-")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

// benchCommand is the command that runs a controller: as it is, or inside the cgroups OSM_BENCH_CGROUP asks for,
// joined by a shell that then execs the controller, so that nothing of it runs outside them.
func benchCommand(b *testing.B, name string, n int, bin string, args []string) *exec.Cmd {
	b.Helper()
	spec := os.Getenv("OSM_BENCH_CGROUP")
	if spec == "" {
		return exec.Command(bin, args...)
	}
	var milliCPU, memMiB int
	for _, kv := range strings.Split(spec, ",") {
		k, v, _ := strings.Cut(kv, "=")
		var err error
		switch k {
		case "cpu":
			milliCPU, err = strconv.Atoi(strings.TrimSuffix(v, "m"))
		case "memory":
			memMiB, err = strconv.Atoi(strings.TrimSuffix(v, "Mi"))
		default:
			err = fmt.Errorf("unknown key %q", k)
		}
		if err != nil {
			b.Fatalf("OSM_BENCH_CGROUP=%q: %v (want cpu=100m,memory=256Mi)", spec, err)
		}
	}
	group := fmt.Sprintf("osm-bench-%s-%d-%d", name, n, os.Getpid())
	var join []string
	if milliCPU > 0 {
		dir := filepath.Join("/sys/fs/cgroup/cpu", group)
		writeCgroup(b, dir, map[string]string{"cpu.cfs_period_us": "100000", "cpu.cfs_quota_us": strconv.Itoa(milliCPU * 100)})
		join = append(join, dir)
	}
	if memMiB > 0 {
		dir := filepath.Join("/sys/fs/cgroup/memory", memoryCgroupParent(b), group)
		writeCgroup(b, dir, map[string]string{"memory.limit_in_bytes": strconv.Itoa(memMiB << 20)})
		join = append(join, dir)
	}
	script := ""
	for _, dir := range join {
		script += "echo $$ > " + filepath.Join(dir, "cgroup.procs") + " && "
	}
	return exec.Command("/bin/sh", append([]string{"-c", script + `exec "$0" "$@"`, bin}, args...)...)
}

// memoryCgroupParent is this process's memory cgroup (the writable one here is a child of it).
func memoryCgroupParent(b *testing.B) string {
	b.Helper()
	data, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if parts := strings.SplitN(line, ":", 3); len(parts) == 3 && parts[1] == "memory" {
			return parts[2]
		}
	}
	return "/"
}

func writeCgroup(b *testing.B, dir string, files map[string]string) {
	b.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.Fatalf("creating cgroup %s (root and a writable cgroup v1 hierarchy needed): %v", dir, err)
	}
	b.Cleanup(func() { _ = os.Remove(dir) }) // once its processes are gone
	for f, v := range files {
		if err := os.WriteFile(filepath.Join(dir, f), []byte(v), 0o644); err != nil {
			b.Fatalf("cgroup %s: %v", filepath.Join(dir, f), err)
		}
	}
}
