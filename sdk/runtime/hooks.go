package runtime

import "time"

// CacheLayer says where a compiled module came from.
type CacheLayer string

const (
	// LayerMemory: the module was already loaded in this process.
	LayerMemory CacheLayer = "memory"
	// LayerDisk: wazero found the machine code in Config.CacheDir.
	LayerDisk CacheLayer = "disk"
	// LayerNone: the module was compiled from scratch.
	LayerNone CacheLayer = "none"
)

// Hooks let the embedder observe the runtime without this package depending on a metrics or logging library.
// Every field is optional. Hooks are called synchronously from the goroutine doing the work and must be cheap
// and safe for concurrent use.
type Hooks struct {
	// Compiled is called after each compilation (not for modules already in memory).
	Compiled func(CompileEvent)
	// CacheHit is called when a load is served from a cache layer (LayerMemory or LayerDisk).
	CacheHit func(layer CacheLayer)
	// Called is called after each export call, successful or not, including the metadata call at load time.
	Called func(CallEvent)
	// Output is called with what the guest wrote to stdout or stderr during a call (where a Go guest's panics
	// go), after the call returns.
	Output func(OutputEvent)
	// Initializing is called when a load starts running the module's own code to snapshot its initialised
	// state (its _initialize and osm_warmup), and again, with Done set, when that code has returned. The
	// rest of a load is the compiler's work; this stretch is the guest's, so a supervisor that bounds loads
	// from outside gives it a call's deadline.
	Initializing func(InitEvent)
}

// InitEvent is the start or the end of a module's initialisation at load time.
type InitEvent struct {
	Digest string
	Done   bool
}

// CompileEvent describes one compilation.
type CompileEvent struct {
	Plugin   string
	Digest   string
	Duration time.Duration
	// Layer is LayerDisk when the machine code came from the disk cache, LayerNone otherwise. The disk layer is
	// detected by a marker OSM keeps beside wazero's cache, so it is a best-effort label.
	Layer CacheLayer
	// NotSnapshotted is empty when the module's instances start from a snapshot of its initialised state
	// (SPEC.md §6), and otherwise says why they initialise themselves.
	NotSnapshotted string
	Err            error
}

// CallEvent describes one export call.
type CallEvent struct {
	Plugin   string
	Digest   string
	Export   string
	Duration time.Duration
	// Memory is how large the call's instance grew, in bytes of linear memory (the guest's and the Extism
	// kernel's), for sizing Config.MemoryLimit; 0 when the call failed before its instance existed.
	Memory uint64
	// Err is nil on success.
	Err *Error
}

// OutputEvent carries guest output of one call.
type OutputEvent struct {
	Plugin string
	Digest string
	Export string
	// Stream is "stderr" or "stdout".
	Stream string
	// Text is the output, cut to Config.MaxOutputBytes. It is the plugin's diagnostics: hosts should log it at
	// debug level (a plugin must not be able to flood an operator's log), and a failed call's *Error quotes
	// its start anyway.
	Text string
	// Truncated is true when the guest wrote more than was kept.
	Truncated bool
}

func (h Hooks) compiled(e CompileEvent) {
	if h.Compiled != nil {
		h.Compiled(e)
	}
}

func (h Hooks) cacheHit(l CacheLayer) {
	if h.CacheHit != nil {
		h.CacheHit(l)
	}
}

func (h Hooks) called(e CallEvent) {
	if h.Called != nil {
		h.Called(e)
	}
}

func (h Hooks) initializing(e InitEvent) {
	if h.Initializing != nil {
		h.Initializing(e)
	}
}

func (h Hooks) output(e OutputEvent) {
	if h.Output != nil {
		h.Output(e)
	}
}
