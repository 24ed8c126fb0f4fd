package pluginhost

import (
	"os"
	"strconv"
	"strings"
	"time"
)

// clockTick is the unit of /proc/<pid>/stat's times: USER_HZ, which Linux fixes at 100 for user space on
// every architecture it runs Go on (the kernel's own HZ may differ; what /proc reports is scaled to USER_HZ).
const clockTick = 10 * time.Millisecond

// processCPU returns how much CPU time process pid has used (user plus system, every thread), by the
// kernel's accounting, or -1 when it cannot be read. The supervisor reads its hosts' this way: a process's
// CPU clock is not readable from another process, its /proc entry is.
func processCPU(pid int) time.Duration {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return -1
	}
	return parseStatCPU(string(b))
}

// parseStatCPU reads utime and stime (fields 14 and 15) from a /proc/<pid>/stat line. The command name
// (field 2) is in parentheses and may hold spaces and parentheses itself, so the fields are counted from
// the last ')'.
func parseStatCPU(stat string) time.Duration {
	end := strings.LastIndexByte(stat, ')')
	if end < 0 {
		return -1
	}
	f := strings.Fields(stat[end+1:])
	// f[0] is field 3 (state): utime is field 14, f[11]; stime f[12].
	if len(f) < 13 {
		return -1
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return -1
	}
	return time.Duration(utime+stime) * clockTick
}
