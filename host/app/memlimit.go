package app

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
)

// cgroupUnlimited: cgroup v1 reports no limit as a number near 2^63; anything above 2^50 bytes is no limit.
const cgroupUnlimited = 1 << 50

// minGoMemory is the least Go heap a memory limit may leave the controller; below it the limit would make the
// collector run without end, and the cgroup's limit is better left to speak for itself.
const minGoMemory = 128 << 20

// SetGoMemoryLimit gives the Go runtime a soft memory limit, unless GOMEMLIMIT sets one: what the cgroup's
// memory limit leaves beside the plugin memory budget. The budget reserves the worst case of every plugin call
// (linear memory, outside the Go heap, and the call stack wazero keeps on it: runtime.MaxStackBytes), but a
// deep call also leaves the smaller stacks it outgrew as garbage, up to about as much again, which the
// collector would otherwise let pile up until the next cycle its pacing picks: sixteen recursing calls grew a
// process by twice its budget without a limit, and within it with one (sdk/runtime
// TestDeepRecursionStaysWithinTheBudget). It returns the limit set, 0 for none, and why, for the log.
func SetGoMemoryLimit(cgroupRoot string, pluginBudget uint64) (int64, string) {
	if v, ok := os.LookupEnv("GOMEMLIMIT"); ok {
		return 0, "GOMEMLIMIT=" + v + " is set"
	}
	limit, why := goMemoryLimit(cgroupRoot, pluginBudget)
	if limit > 0 {
		debug.SetMemoryLimit(limit)
	}
	return limit, why
}

// goMemoryLimit computes SetGoMemoryLimit's limit from the cgroup (v2 memory.max, or v1
// memory/memory.limit_in_bytes) under cgroupRoot.
func goMemoryLimit(cgroupRoot string, pluginBudget uint64) (int64, string) {
	cgroup, err := cgroupMemoryLimit(cgroupRoot)
	switch {
	case err != nil:
		return 0, "no cgroup memory limit readable: " + err.Error()
	case cgroup == 0:
		return 0, "the cgroup sets no memory limit"
	case cgroup < pluginBudget+minGoMemory:
		return 0, fmt.Sprintf("the cgroup's memory limit (%d MiB) leaves less than %d MiB beside the plugin memory budget (%d MiB): lower -plugin-memory-budget-mib",
			cgroup>>20, minGoMemory>>20, pluginBudget>>20)
	}
	return int64(cgroup - pluginBudget), fmt.Sprintf("the cgroup's memory limit (%d MiB) less the plugin memory budget (%d MiB)", cgroup>>20, pluginBudget>>20)
}

// cgroupMemoryLimit reads the memory limit of the process's cgroup, 0 when there is none.
func cgroupMemoryLimit(root string) (uint64, error) {
	b, err := os.ReadFile(filepath.Join(root, "memory.max"))
	if os.IsNotExist(err) {
		b, err = os.ReadFile(filepath.Join(root, "memory", "memory.limit_in_bytes"))
	}
	if err != nil {
		return 0, err
	}
	s := strings.TrimSpace(string(b))
	if s == "max" {
		return 0, nil
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("cgroup memory limit %q: %w", s, err)
	}
	if n >= cgroupUnlimited {
		return 0, nil
	}
	return n, nil
}
