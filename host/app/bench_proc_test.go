package app_test

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	goruntime "runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// sample is one series of a Prometheus text exposition.
type sample struct {
	name   string
	labels map[string]string
	value  float64
}

func (s sample) key() string {
	keys := make([]string, 0, len(s.labels))
	for k := range s.labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var sb strings.Builder
	sb.WriteString(s.name)
	for _, k := range keys {
		sb.WriteString("," + k + "=" + s.labels[k])
	}
	return sb.String()
}

// parseMetrics returns the series of the named metrics from a Prometheus text exposition.
func parseMetrics(text string, names ...string) []sample {
	var out []sample
	for _, line := range strings.Split(text, "\n") {
		if line == "" || line[0] == '#' {
			continue
		}
		name, rest := line, ""
		labels := map[string]string{}
		if i := strings.IndexByte(line, '{'); i >= 0 {
			j := strings.LastIndexByte(line, '}')
			if j < i {
				continue
			}
			name, rest = line[:i], strings.TrimSpace(line[j+1:])
			labels = parseLabels(line[i+1 : j])
		} else if f := strings.Fields(line); len(f) >= 2 {
			name, rest = f[0], f[1]
		}
		if !contains(names, name) {
			continue
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			continue
		}
		out = append(out, sample{name: name, labels: labels, value: v})
	}
	return out
}

func parseLabels(s string) map[string]string {
	out := map[string]string{}
	for s != "" {
		eq := strings.IndexByte(s, '=')
		if eq < 0 || eq+1 >= len(s) || s[eq+1] != '"' {
			return out
		}
		key := strings.TrimSpace(s[:eq])
		s = s[eq+2:]
		var val strings.Builder
		i := 0
		for ; i < len(s) && s[i] != '"'; i++ {
			if s[i] == '\\' && i+1 < len(s) {
				i++
			}
			val.WriteByte(s[i])
		}
		out[key] = val.String()
		s = strings.TrimLeft(s[min(i+1, len(s)):], ", ")
	}
	return out
}

// sum adds the values of the series named name.
func sum(samples []sample, name string) float64 {
	total := 0.0
	for _, s := range samples {
		if s.name == name {
			total += s.value
		}
	}
	return total
}

// scrapeController reads a controller's own metrics endpoint.
func scrapeController(port int, names ...string) []sample {
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", port))
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return parseMetrics(string(data), names...)
}

// procStatus returns a field of /proc/<pid>/status in KiB (VmRSS, VmHWM).
func procStatus(pid int, field string) int {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(line, field+":") {
			if f := strings.Fields(line); len(f) >= 2 {
				v, _ := strconv.Atoi(f[1])
				return v
			}
		}
	}
	return 0
}

// clockTicks is USER_HZ, the unit of utime and stime in /proc/<pid>/stat; 100 on every Linux architecture Go
// supports.
const clockTicks = 100

// cpuTime is the user plus system CPU time a process has used so far.
func cpuTime(pid int) time.Duration {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The command name may contain spaces; the fields after it start after the last ')'.
	s := string(data)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		return 0
	}
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * time.Second / clockTicks
}

// memSplit is where a process's resident memory is, from /proc/<pid>/smaps, in KiB.
type memSplit struct {
	// Anon is private anonymous read-write memory: the Go heap and goroutine stacks (and any C allocation).
	Anon int
	// Guest is wasm linear memory: the runtime reserves each instance's memory with MAP_NORESERVE (VmFlags
	// "nr"), outside the Go heap.
	Guest int
	// AnonExec is anonymous executable memory: machine code wazero compiled from wasm.
	AnonExec int
	// Binary is the controller executable's own pages (text, rodata: embedded plugins live there).
	Binary int
	// Files is every other file mapping (shared libraries, mmap'd cache files).
	Files int
}

func (m memSplit) String() string {
	mib := func(k int) float64 { return float64(k) / 1024 }
	return fmt.Sprintf("%.0f MiB: Go heap+stacks (anon) %.0f MiB, wasm guest memory %.0f MiB, wasm code %.0f MiB, binary %.0f MiB, other files %.0f MiB",
		mib(m.Anon+m.Guest+m.AnonExec+m.Binary+m.Files), mib(m.Anon), mib(m.Guest), mib(m.AnonExec), mib(m.Binary), mib(m.Files))
}

// mapping is one entry of /proc/<pid>/smaps.
type mapping struct {
	perms, path, flags string
	rss                int
}

func (m memSplit) add(mp mapping, exe string) memSplit {
	switch {
	case mp.path != "" && mp.path == exe:
		m.Binary += mp.rss
	case mp.path != "" && !strings.HasPrefix(mp.path, "["):
		m.Files += mp.rss
	case strings.Contains(mp.perms, "x"):
		m.AnonExec += mp.rss
	case strings.Contains(" "+mp.flags+" ", " nr "):
		m.Guest += mp.rss
	default:
		m.Anon += mp.rss
	}
	return m
}

func smapsSplit(pid int) memSplit {
	f, err := os.Open(fmt.Sprintf("/proc/%d/smaps", pid))
	if err != nil {
		return memSplit{}
	}
	defer f.Close()
	exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
	var out memSplit
	var cur *mapping
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		switch {
		case len(fields) >= 5 && strings.Contains(fields[0], "-") && !strings.HasSuffix(fields[0], ":"):
			// A mapping's header: range perms offset dev inode [path]
			if cur != nil {
				out = out.add(*cur, exe)
			}
			cur = &mapping{perms: fields[1]}
			if len(fields) >= 6 {
				cur.path = strings.Join(fields[5:], " ")
			}
		case cur != nil && len(fields) >= 2 && fields[0] == "Rss:":
			cur.rss, _ = strconv.Atoi(fields[1])
		case cur != nil && len(fields) >= 1 && fields[0] == "VmFlags:":
			cur.flags = strings.Join(fields[1:], " ")
		}
	}
	if cur != nil {
		out = out.add(*cur, exe)
	}
	return out
}

// procStat returns a process's own CPU time (utime+stime) and that of its children it has waited for
// (cutime+cstime), from /proc/<pid>/stat; ok is false once the process is gone.
func procStat(pid int) (self, reaped time.Duration, ok bool) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0, false
	}
	// The command name may contain spaces; the fields after it start after the last ')'.
	s := string(data)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 15 {
		return 0, 0, false
	}
	ticks := func(i int) time.Duration {
		v, _ := strconv.ParseInt(f[i], 10, 64)
		return time.Duration(v) * time.Second / clockTicks
	}
	return ticks(11) + ticks(12), ticks(13) + ticks(14), true
}

// descendants lists the live descendants of pid (children of every thread, recursively): our controller's
// plugin host processes. Upstream's has none.
func descendants(pid int) []int {
	var out []int
	queue := []int{pid}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		tasks, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", p))
		for _, t := range tasks {
			data, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/children", p, t.Name()))
			if err != nil {
				continue
			}
			for _, c := range strings.Fields(string(data)) {
				if cp, err := strconv.Atoi(c); err == nil && !containsInt(out, cp) {
					out = append(out, cp)
					queue = append(queue, cp)
				}
			}
		}
	}
	return out
}

// treeCPU is the CPU time the process tree under pid has used so far: the controller's own, that of the
// children it has reaped (cutime+cstime: a plugin host that was killed or restarted), and that of every live
// descendant (a long-lived plugin host, which cutime covers only once it has exited) with the children they
// reaped in turn. A host that exits between the two reads is counted once: either live or reaped.
func treeCPU(pid int) (total, hosts time.Duration) {
	for _, p := range descendants(pid) {
		if self, reaped, ok := procStat(p); ok {
			hosts += self + reaped
		}
	}
	self, reaped, _ := procStat(pid)
	hosts += reaped
	return self + hosts, hosts
}

// rssSampler polls the resident memory of a process tree (the controller and its plugin hosts) every 50 ms
// and keeps the largest sum and the smaps split of the tree at it, so the report says where memory was at
// (or within one sampling period of) the peak. Both controllers are measured this way, so a tree of several
// processes and a single process are compared alike.
type rssSampler struct {
	pid     int
	peakRSS int
	peakAt  time.Duration
	atPeak  memSplit
	snapRSS int
	// procs is the most processes the tree had at once; hostHWM the largest VmHWM of a descendant.
	procs   int
	hostHWM int
	stop    chan struct{}
	done    chan struct{}
}

func sampleRSS(pid int, start time.Time) *rssSampler {
	s := &rssSampler{pid: pid, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-s.stop:
				return
			case <-t.C:
			}
			tree := ownMemory(append([]int{pid}, descendants(pid)...))
			rss := 0
			for _, p := range tree {
				rss += procStatus(p, "VmRSS")
				if p != pid {
					s.hostHWM = max(s.hostHWM, procStatus(p, "VmHWM"))
				}
			}
			s.procs = max(s.procs, len(tree))
			// A new split each time the peak grows by 1 MiB or more (reading smaps takes about a millisecond).
			if rss > s.peakRSS {
				if rss > s.snapRSS+1024 {
					var split memSplit
					for _, p := range tree {
						split = split.plus(smapsSplit(p))
					}
					s.atPeak, s.snapRSS = split, rss
				}
				s.peakRSS, s.peakAt = rss, time.Since(start)
			}
		}
	}()
	return s
}

// ownMemory drops from a process tree every process that shares its address space with one listed before it.
// Go starts a process with clone(CLONE_VM|CLONE_VFORK): until the child execs, it runs in its parent's memory,
// and /proc reports that memory as the child's VmRSS too. A sample taken then counted the controller twice (a
// 90 MiB peak at N=1, 67 MiB of it "binary", against 86 MiB in the runs beside it).
func ownMemory(tree []int) []int {
	var out []int
	for _, p := range tree {
		if !slices.ContainsFunc(out, func(q int) bool { return sameMemory(p, q) }) {
			out = append(out, p)
		}
	}
	return out
}

// kcmpVM is kcmp(2)'s KCMP_VM: do two processes share one address space.
const kcmpVM = 1

// sameMemory reports whether processes a and b share one address space.
func sameMemory(a, b int) bool {
	r, _, errno := unix.Syscall6(unix.SYS_KCMP, uintptr(a), uintptr(b), kcmpVM, 0, 0, 0)
	return errno == 0 && r == 0
}

func (m memSplit) plus(o memSplit) memSplit {
	return memSplit{Anon: m.Anon + o.Anon, Guest: m.Guest + o.Guest, AnonExec: m.AnonExec + o.AnonExec, Binary: m.Binary + o.Binary, Files: m.Files + o.Files}
}

func (s *rssSampler) finish() {
	close(s.stop)
	<-s.done
}

// machineInfo says what the benchmark ran on: figures from different machines are never comparable.
func machineInfo() string {
	model := "unknown CPU"
	if data, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(data), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				model = strings.TrimSpace(v)
				break
			}
		}
	}
	load := ""
	if data, err := os.ReadFile("/proc/loadavg"); err == nil {
		if f := strings.Fields(string(data)); len(f) >= 3 {
			load = ", load average " + strings.Join(f[:3], " ")
		}
	}
	return fmt.Sprintf("%s, %d cores (GOMAXPROCS %d), %s/%s%s", model, goruntime.NumCPU(), goruntime.GOMAXPROCS(0), goruntime.GOOS, goruntime.GOARCH, load)
}

func writeTemp(b *testing.B, name string, data []byte) string {
	b.Helper()
	path := filepath.Join(b.TempDir(), name)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		b.Fatal(err)
	}
	return path
}
