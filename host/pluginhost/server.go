package pluginhost

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"runtime/pprof"
	"strconv"
	"syscall"
	"time"

	"github.com/osmhq/osm/sdk/abi"
	"github.com/osmhq/osm/sdk/runtime"
)

// envConfig names the environment variable that turns a process into a plugin host: it holds the host's
// HostConfig as JSON. The supervisor sets it on the child it starts, and only there.
const envConfig = "OSM_PLUGIN_HOST_CONFIG"

// envCPUProfile, set in the controller's environment, makes each of its plugin hosts write a CPU profile to
// that path plus "." and its process ID until it ends (hosts come and go; go tool pprof merges the files).
const envCPUProfile = "OSM_PLUGIN_HOST_CPUPROFILE"

// HostConfig is what a plugin host process runs with.
type HostConfig struct {
	// Runtime limits, as sdk/runtime's Config: per-instance memory cap, per-call timeout (a courtesy inside the
	// host: the supervisor kills the host when a call overruns it), the memory budget of concurrent calls, and
	// the compiled-code cache directory.
	MemoryLimit  uint64        `json:"memoryLimit,omitempty"`
	Timeout      time.Duration `json:"timeout,omitempty"`
	MemoryBudget uint64        `json:"memoryBudget,omitempty"`
	CacheDir     string        `json:"cacheDir,omitempty"`
	NoSnapshot   bool          `json:"noSnapshot,omitempty"`
	// NoInterrupt compiles modules without wazero's close-on-context-done. With it (the default), a loop past
	// the call's timeout ends inside the host, which costs no restart and counts against no module, so a
	// plugin that loops for one MachineDeployment is not quarantined for all of them; only what the check
	// cannot stop (bulk memory operations, host calls, a stuck collector) is killed. The check costs a default
	// render about 2.5 ms of CPU, which the output memo makes rare (one render per distinct configuration).
	NoInterrupt bool `json:"noInterrupt,omitempty"`
	// AddressSpace is the host's RLIMIT_AS in bytes (0: none): an allocation past it fails in the kernel, and
	// the Go runtime ends the host with "out of memory" instead of growing.
	AddressSpace uint64 `json:"addressSpace,omitempty"`
	// Landlock makes the file system read-only for the process (restrictWrites) before it reads its first
	// module: wholly for a host that runs guest code (ReadOnlyCache), all but CacheDir for a compile process.
	// The supervisor sets it on every process it starts.
	Landlock bool `json:"landlock,omitempty"`
	// ReadOnlyCache: the host reads CacheDir and never writes it (sdk/runtime's Config.ReadOnlyCache). The
	// supervisor sets it on every host that runs guest code.
	ReadOnlyCache bool `json:"readOnlyCache,omitempty"`
	// Artifacts are the digests the files of CacheDir that hold code must have (verifyArtifacts), checked
	// before the host reads its first module.
	Artifacts Artifacts `json:"artifacts,omitempty"`
	// Stamps are the supervisor's stamps of the files of CacheDir it hashed against Artifacts: a file whose
	// stamp is unchanged is not hashed again (Stamp).
	Stamps Stamps `json:"stamps,omitempty"`
	// Role is roleBuiltin, roleTenant or roleCompile: a compile process compiles the module it reads from its
	// standard input (Name, Digest) into CacheDir and ends, running none of its code (compileMain).
	Role   string `json:"role,omitempty"`
	Name   string `json:"name,omitempty"`
	Digest string `json:"digest,omitempty"`
}

// init makes every binary that links this package able to serve as a plugin host: the supervisor starts its
// own executable with envConfig set, so the controller, osmctl and test binaries need no second binary and
// no flag parsing before the host runs. The variable is removed at once, so nothing the host starts sees it.
func init() {
	cfgJSON, ok := os.LookupEnv(envConfig)
	if !ok {
		return
	}
	_ = os.Unsetenv(envConfig)
	os.Exit(hostMain(cfgJSON))
}

func hostMain(cfgJSON string) int {
	var cfg HostConfig
	if err := json.Unmarshal([]byte(cfgJSON), &cfg); err != nil {
		fmt.Fprintln(os.Stderr, "plugin host: bad configuration:", err)
		return 2
	}
	if cfg.Role == roleCompile {
		return compileMain(cfg, os.Stdin, os.Stdout)
	}
	if cfg.ReadOnlyCache && cfg.CacheDir != "" {
		if err := verifyArtifacts(cfg.CacheDir, cfg.Artifacts, cfg.Stamps); err != nil {
			if cfg.Role == roleTenant {
				// The supervisor compiles the module again in a compile process; nothing here read the cache.
				fmt.Fprintln(os.Stderr, tamperedPrefix+err.Error())
				return exitTampered
			}
			// The built-in modules are compiled from the executable's own bytes, in this host's memory.
			fmt.Fprintln(os.Stderr, "plugin host: ignoring the compilation cache:", err)
			cfg.CacheDir = ""
		}
	}
	// A CPU profile of the host, for diagnosis: the controller's own -pprof-address does not see this process.
	// Opened before confine: Landlock leaves open files writable, and refuses to create one afterwards.
	if path := os.Getenv(envCPUProfile); path != "" {
		if f, err := os.Create(path + "." + strconv.Itoa(os.Getpid())); err == nil {
			if pprof.StartCPUProfile(f) == nil {
				defer pprof.StopCPUProfile()
			}
		}
	}
	if err := confine(cfg); err != nil {
		fmt.Fprintln(os.Stderr, "plugin host:", err)
		return 2
	}
	if _, set := os.LookupEnv("GOGC"); !set {
		debug.SetGCPercent(hostGCPercent)
	}
	if err := Serve(os.Stdin, os.Stdout, cfg); err != nil && !errors.Is(err, io.EOF) {
		fmt.Fprintln(os.Stderr, "plugin host:", err)
		return 1
	}
	return 0
}

// hostGCPercent is the host's GOGC unless the environment sets one. A load's garbage comes in one burst on a
// small heap, so the collector's goal decides the host's peak: loading the ubuntu plugin from the compilation
// cache and rendering peaked at 55.6 MiB resident with GOGC=100 and 47.0 MiB with 50 (medians of 2,
// BenchmarkBuiltinMemory/identify-render-one in host/plugin, host-HWM-MiB, 2026-11-27); 25 and 10 gained
// nothing more. The heap is small, so the extra collections cost little.
const hostGCPercent = 50

// confine applies the OS bounds a host sets on itself before it reads its first module: its address space,
// the kernel's choice of victim when the pod's cgroup runs out of memory (the host, not the controller), and
// where it may write (its own compilation cache).
func confine(cfg HostConfig) error {
	if cfg.AddressSpace > 0 {
		lim := &syscall.Rlimit{Cur: cfg.AddressSpace, Max: cfg.AddressSpace}
		if err := syscall.Setrlimit(syscall.RLIMIT_AS, lim); err != nil {
			return fmt.Errorf("setting RLIMIT_AS to %d bytes: %w", cfg.AddressSpace, err)
		}
	}
	// Raising one's own OOM score needs no privilege; failing to (no /proc) only loses the preference.
	_ = os.WriteFile("/proc/self/oom_score_adj", []byte(strconv.Itoa(1000)), 0)
	if cfg.Landlock && cfg.ReadOnlyCache {
		return restrictWrites("")
	}
	if cfg.Landlock {
		if cfg.CacheDir != "" {
			// The runtime creates it; it must exist for Landlock to name it.
			if err := os.MkdirAll(cfg.CacheDir, 0o700); err != nil {
				return err
			}
		}
		return restrictWrites(cfg.CacheDir)
	}
	return nil
}

// Serve runs a plugin host on a pipe pair until r ends: it loads, compiles and calls modules in one
// sdk/runtime Runtime, each request in a goroutine of its own, and reports the runtime's hook events.
func Serve(r io.Reader, w io.Writer, cfg HostConfig) error {
	out := &frameWriter{w: w}
	send := func(e *wireEvent) { _ = out.write(&header{Op: opEvent, Event: e}, nil) }
	rt, err := runtime.New(cfg.runtimeConfig(runtime.Hooks{
		Compiled: func(e runtime.CompileEvent) {
			send(&wireEvent{Kind: "compiled", Plugin: e.Plugin, Digest: e.Digest, Seconds: e.Duration.Seconds(),
				Layer: e.Layer, NotSnapshotted: e.NotSnapshotted, Err: toWire(e.Err)})
		},
		CacheHit: func(l runtime.CacheLayer) { send(&wireEvent{Kind: "cacheHit", Layer: l}) },
		Called: func(e runtime.CallEvent) {
			if e.Err == nil && e.Export != abi.ExportMetadata {
				return // a successful call's duration travels in its reply (serveOne), saving a frame
			}
			ev := &wireEvent{Kind: "called", Plugin: e.Plugin, Digest: e.Digest, Export: e.Export, Seconds: e.Duration.Seconds(), Memory: e.Memory}
			if e.Err != nil {
				ev.Err = toWire(e.Err)
			}
			send(ev)
		},
		Initializing: func(e runtime.InitEvent) {
			kind := "initializing"
			if e.Done {
				kind = "initialized"
			}
			send(&wireEvent{Kind: kind, Digest: e.Digest})
		},
		Output: func(e runtime.OutputEvent) {
			send(&wireEvent{Kind: "output", Plugin: e.Plugin, Digest: e.Digest, Export: e.Export, Stream: e.Stream, Text: e.Text, Truncated: e.Truncated})
		},
	}))
	if err != nil {
		return err
	}
	defer func() { _ = rt.Close(context.Background()) }()
	// Ready tells the supervisor the host started: a host that dies before saying so failed on its own, and
	// no module is to blame.
	if err := out.write(&header{Op: opReady}, nil); err != nil {
		return err
	}
	in := newFrameReader(r)
	for {
		h, payload, err := in.read()
		if err != nil {
			return err
		}
		go serveOne(rt, out, h, payload)
	}
}

func serveOne(rt *runtime.Runtime, out *frameWriter, h *header, payload []byte) {
	reply := &header{ID: h.ID, Op: opReply}
	var result []byte
	ctx := context.Background()
	switch h.Op {
	case opLoad:
		if h.File != nil {
			if payload, reply.Err = readModule(h, rt.Config().MaxModuleBytes); reply.Err != nil {
				break
			}
		}
		mod, err := rt.Load(ctx, h.Name, payload)
		if err != nil {
			reply.Err = toWire(err)
			break
		}
		if mod.Digest() != h.Digest {
			_ = rt.Unload(ctx, mod.Digest())
			reply.Err = &wireError{Plugin: h.Name, Digest: h.Digest, Reason: runtime.ReasonInvalidModule,
				Detail: fmt.Sprintf("module bytes have digest %s, not %s", mod.Digest(), h.Digest)}
			break
		}
		returnMemory()
		reply.Metadata, _ = json.Marshal(mod.Metadata())
		for _, e := range []string{abi.ExportValidate, abi.ExportEncode} {
			if mod.Implements(e) {
				reply.Exports = append(reply.Exports, e)
			}
		}
	case opCall:
		mod, ok := rt.Get(h.Digest)
		if !ok {
			reply.Err = &wireError{Digest: h.Digest, Export: h.Export, Reason: reasonNotLoaded, Detail: "module not loaded in this plugin host"}
			break
		}
		began := time.Now()
		out, err := mod.Call(ctx, h.Export, payload)
		if err != nil {
			reply.Err = toWire(err)
			break
		}
		reply.Plugin, reply.Seconds = mod.Name(), time.Since(began).Seconds()
		result = out
	case opUnload:
		_ = rt.Unload(ctx, h.Digest)
		returnMemory()
	default:
		reply.Err = &wireError{Reason: runtime.ReasonInvalidInput, Detail: "unknown operation " + strconv.Quote(h.Op)}
	}
	if err := out.write(reply, result); errors.Is(err, errFrameTooLarge) {
		// Errors are truncated (toWire); what remains too large is the module's metadata or a reply past the
		// payload bound: the operation fails with its reason, at once.
		reason := runtime.ReasonInvalidOutput
		if h.Op == opLoad {
			reason = runtime.ReasonInvalidModule
		}
		_ = out.write(&header{ID: h.ID, Op: opReply, Err: &wireError{Digest: h.Digest, Export: h.Export, Reason: reason,
			Detail: "the plugin host's reply is too large for the wire: " + err.Error()}}, nil)
	}
}

// returnMemory gives the memory a load or unload left behind back to the OS at once. A load's garbage (the
// module's bytes as received, the snapshot read from the cache, wazero's decoding) is about 20 MB for a
// default plugin, which the Go runtime would otherwise keep resident for minutes: the host's heap only grows
// in bursts of loads, so the background scavenger's pace leaves it there for the host's whole life. After
// loading and rendering the ubuntu plugin the host held 46 MiB without this and 41 MiB with it
// (BenchmarkBuiltinMemory/identify-render-one in host/plugin, host-RSS-MiB, 2026-11-27). A collection of a
// heap this small costs well under a millisecond.
func returnMemory() { debug.FreeOSMemory() }

// readModule reads the module a load request names by file and checks its digest before anything parses it.
// Any failure is reasonFileUnusable: the supervisor then sends the bytes instead.
func readModule(h *header, maxBytes int) ([]byte, *wireError) {
	unusable := func(detail string) *wireError {
		return &wireError{Plugin: h.Name, Digest: h.Digest, Reason: reasonFileUnusable, Detail: detail}
	}
	if h.File.Length <= 0 || h.File.Offset < 0 || (maxBytes > 0 && h.File.Length > int64(maxBytes)) {
		return nil, unusable(fmt.Sprintf("%d bytes at %d of %s is not a module's range", h.File.Length, h.File.Offset, h.File.Path))
	}
	f, err := os.Open(h.File.Path)
	if err != nil {
		return nil, unusable(err.Error())
	}
	defer func() { _ = f.Close() }()
	wasm := make([]byte, h.File.Length)
	if _, err := f.ReadAt(wasm, h.File.Offset); err != nil {
		return nil, unusable(fmt.Sprintf("reading %d bytes at %d of %s: %v", h.File.Length, h.File.Offset, h.File.Path, err))
	}
	if d := runtime.Digest(wasm); d != h.Digest {
		return nil, unusable(fmt.Sprintf("the %d bytes at %d of %s have digest %s, not %s", h.File.Length, h.File.Offset, h.File.Path, d, h.Digest))
	}
	return wasm, nil
}

// reasonFileUnusable tells the supervisor that a module named by file could not be loaded from it (unreadable,
// or other bytes than the digest says); it sends the bytes instead. It never reaches a caller.
const reasonFileUnusable runtime.Reason = "FileUnusable"

// reasonNotLoaded tells the supervisor to send the module first; it never reaches a caller.
const reasonNotLoaded runtime.Reason = "NotLoaded"
