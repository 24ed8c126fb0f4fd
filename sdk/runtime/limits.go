package runtime

import "fmt"

// Limits are the resources that several Runtimes share when given the same Limits: the memory budget of all
// their calls and the compile lanes. A host that keeps one Runtime per module (so that unloading a module frees
// its machine code) passes one Limits to all of them; otherwise each Runtime would have a budget of its own and
// the bound would grow with the number of modules.
type Limits struct {
	memory    *budget
	compiling chan struct{}
}

// NewLimits creates limits for memoryBudget bytes of linear memory across all calls and compileConcurrency
// modules compiling at once. Zero values take the defaults (DefaultMemoryBudget, DefaultCompileConcurrency).
func NewLimits(memoryBudget uint64, compileConcurrency int) *Limits {
	if memoryBudget == 0 {
		memoryBudget = DefaultMemoryBudget
	}
	if compileConcurrency <= 0 {
		compileConcurrency = DefaultCompileConcurrency
	}
	return &Limits{memory: newBudget(memoryBudget), compiling: make(chan struct{}, compileConcurrency)}
}

// limits returns the limits a Runtime with cfg uses: cfg.Limits, checked to hold one call, or its own.
func (c Config) limits() (*Limits, error) {
	if c.Limits == nil {
		return NewLimits(c.MemoryBudget, c.CompileConcurrency), nil
	}
	if c.Limits.memory.size < c.callMemory() {
		return nil, fmt.Errorf("shared memory budget %d MiB holds not even one call (%s)", c.Limits.memory.size>>20, c.callMemoryParts())
	}
	return c.Limits, nil
}
