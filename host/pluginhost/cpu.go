package pluginhost

import (
	"os"
	"strconv"
	"strings"
)

// threadCPU returns how long thread tid of process pid (0: this process) has run on a CPU, in nanoseconds,
// from the scheduler's statistics (the same clock as CLOCK_THREAD_CPUTIME_ID), or -1 when they cannot be
// read. The supervisor reads the host's threads this way: a thread's CPU clock is not readable from another
// process, its /proc entry is.
func threadCPU(pid, tid int) int64 {
	proc := "self"
	if pid != 0 {
		proc = strconv.Itoa(pid)
	}
	b, err := os.ReadFile("/proc/" + proc + "/task/" + strconv.Itoa(tid) + "/schedstat")
	if err != nil {
		return -1
	}
	run, _, _ := strings.Cut(string(b), " ")
	n, err := strconv.ParseInt(run, 10, 64)
	if err != nil {
		return -1
	}
	return n
}
