// Package pluginhost runs plugins in processes that the operating system bounds, and supervises them.
//
// The controller, its webhooks and osmctl never compile or run guest code. A Supervisor starts plugin hosts
// (the same executable, or cmd/osm-plugin-host next to it, turned into a host by an environment variable: see
// init) and talks to each over a pipe pair with the ABI's JSON (wire.go). The unit of isolation is the module:
//
//   - a module of a tenant (pulled from a registry) gets a host process of its own, keyed by its digest, that
//     runs nothing else. Its death is its module's by construction: no blame is guessed. The built-in modules
//     (shipped inside the controller's executable and digest-checked by the host) share one trusted host.
//   - time: every operation has a budget of the host's CPU time (the call timeout plus a grace, or the load
//     timeout), read from the kernel's accounting of the host process (/proc/<pid>/stat) and shared among the
//     operations in flight, and a wall-clock cap WallFactor times larger for a host that gets no CPU at all. A
//     throttled pod slows its hosts down without making them overrun; past either bound the supervisor kills
//     the host with SIGKILL. Inside the host, wazero's close-on-context-done usually ends the call on time, but
//     nothing depends on it.
//   - memory: the host's RSS is polled (Config.MaxRSS) and the host killed above it; its address space is
//     capped with RLIMIT_AS, and it offers itself to the kernel's OOM killer first (oom_score_adj 1000).
//   - priority: tenants' hosts run at a lower CPU priority (Config.TenantNice) than the built-in host.
//   - compilation apart from execution: a tenant's module is compiled by a compile process (compile.go) that
//     runs none of its code, bounded as a host is; the supervisor records the digests of what it wrote
//     (Artifacts) before any host runs from it. No host, the processes that run guest code, can write
//     anything (Landlock where the kernel has it: restrictWrites), and each checks its cache against the
//     recorded digests, or the build's for the built-ins, before it reads a module (verifyArtifacts).
//   - repetition: every death of a tenant's host is one strike against its digest; two within
//     QuarantineWindow quarantine the digest, its operations failing at once for a while that doubles each
//     time. The built-in host's deaths strike nothing: no tenant's module runs there.
//   - number: at most MaxHosts tenants' hosts live at once, MaxHostsPerNamespace of one namespace's modules
//     (and so as many compiles). Past it the least recently used idle one stops; when none is idle, a new
//     module's operation waits for one (at most its load's wall-clock cap). The built-in host holds at most
//     MaxBuiltinModules modules, and makes room the same way (proc.admit).
//   - what is loaded where: the supervisor is the controller's one registry of loaded modules (hosts, and in
//     each host the modules it loaded: proc.loaded). A host no operation used for IdleTimeout stops, and the
//     built-in host forgets a module no operation used for as long; neither happens under an operation in
//     flight. A load that fails for a reason retrying will not fix (Config.Permanent, and a compile wazero
//     refuses) is remembered by digest, so a broken module costs one load, not one per reconcile.
//
// The design follows Chromium's site isolation and Crossplane functions (third-party logic in a process of
// its own, killed by the host when it misbehaves).
package pluginhost

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/osmhq/osm/sdk/abi"
	"github.com/osmhq/osm/sdk/runtime"
)

// Reasons a supervisor adds to sdk/runtime's.
const (
	// ReasonHostCrashed: the module's plugin host died (a crash of the runtime, an allocation past RLIMIT_AS,
	// a frame past the wire's bound), or a host could not start.
	ReasonHostCrashed runtime.Reason = "HostCrashed"
	// ReasonQuarantined: the module killed its plugin host repeatedly and is not run for a while.
	ReasonQuarantined runtime.Reason = "Quarantined"
)

// HostExecutable is the name of the dedicated plugin host (cmd/osm-plugin-host) next to the controller.
const HostExecutable = "osm-plugin-host"

// Defaults for Config fields left zero.
const (
	DefaultGrace = 2 * time.Second
	// DefaultLoadTimeout bounds the host CPU time of checking, snapshotting and compiling a module: a default
	// plugin takes 1–4 CPU-seconds cold and a tenth of one from the disk cache. The module's own code that a
	// load runs (its initialisation while it is snapshotted, and once compiled the osm_metadata call that
	// completes the load) gets a call's budget instead (proc.progress).
	DefaultLoadTimeout = time.Minute
	// DefaultWallFactor: an operation's wall-clock cap is this many times its CPU budget, for a host that gets
	// no CPU at all (stopped, or starved by the machine). A pod limited to a tenth of a CPU still gets its
	// default plugins' 1–2 CPU-seconds of loading well within it.
	DefaultWallFactor       = 5
	DefaultMaxRSS           = 768 << 20
	DefaultWatchInterval    = 100 * time.Millisecond
	DefaultQuarantineWindow = 10 * time.Minute
	DefaultQuarantine       = time.Minute
	maxQuarantine           = 30 * time.Minute
	// DefaultIdleTimeout stops a host once no operation has used it for this long. Renders that the output
	// memo answers never reach a host, so after a burst of new configurations it has nothing to do, and a host
	// holds 40 MiB and more (compiled machine code: ~18 MiB per default plugin). The next operation starts a
	// new one, which loads its modules from the compilation cache: a render that starts a host took
	// 110–210 ms in make bench-compare at N=1.
	DefaultIdleTimeout = 500 * time.Millisecond
	// DefaultMaxHosts bounds the tenants' hosts alive at once (the built-in host is not counted): a host with
	// a Go plugin loaded holds 40–60 MiB, so eight fit the controller's memory limit beside the built-in host.
	DefaultMaxHosts = 8
	// DefaultMaxBuiltinModules bounds the modules the built-in host holds at once. Each default plugin's
	// machine code is ~18 MiB, and MachineDeployments of five OSes rendering at once had the built-in host hold
	// all five: 182 MiB for the process tree at five MachineDeployments, against 43 MiB for upstream OSM. The
	// output memo answers all but a profile's first renders, so one at a time costs a load from the
	// compilation cache (~60 ms) at each change of OS.
	DefaultMaxBuiltinModules = 1
	// DefaultTenantNice is the nice value of tenants' hosts; the built-in host keeps the controller's.
	DefaultTenantNice = 10
	// DefaultMaxHostsPerNamespace bounds the hosts, and so the compiles, of one namespace's modules at once: a
	// namespace that mints new digests (a custom section is enough) waits for its own hosts.
	DefaultMaxHostsPerNamespace = 3
)

// Config configures a Supervisor.
type Config struct {
	// Host is the host processes' configuration.
	Host HostConfig
	// Executable is the binary started as a host; it must link this package. Default: HostExecutable next to
	// this process's executable if there is one (the image ships it), else this process's own.
	Executable string
	// Grace is how much CPU time past the call timeout a call may use before its host is killed. Default
	// DefaultGrace.
	Grace time.Duration
	// LoadTimeout bounds the CPU time of loading (checking, compiling, initialising) a module. Default
	// DefaultLoadTimeout.
	LoadTimeout time.Duration
	// WallFactor times an operation's CPU budget is its wall-clock cap. Default DefaultWallFactor.
	WallFactor int
	// MaxRSS kills a host whose resident memory exceeds it, in bytes. Default DefaultMaxRSS; negative: none.
	MaxRSS uint64
	// IdleTimeout stops a host when no operation used it for this long, and has the built-in host forget a
	// module no operation used for this long. Default DefaultIdleTimeout; negative: never (MaxHosts still
	// evicts idle tenants' hosts).
	IdleTimeout time.Duration
	// MaxHosts bounds the tenants' hosts alive at once. Default DefaultMaxHosts.
	MaxHosts int
	// MaxHostsPerNamespace bounds the hosts of one namespace's modules (Module.Namespace) alive at once.
	// Default DefaultMaxHostsPerNamespace.
	MaxHostsPerNamespace int
	// MaxBuiltinModules bounds the modules the built-in host holds at once. Default DefaultMaxBuiltinModules.
	MaxBuiltinModules int
	// TenantNice is the nice value tenants' hosts run at. Default DefaultTenantNice; negative: the
	// controller's own.
	TenantNice int
	// NoLandlock leaves the hosts' file system writable (see restrictWrites): for diagnosis only.
	NoLandlock bool
	// WatchInterval is how often deadlines and memory are checked. Default DefaultWatchInterval.
	WatchInterval time.Duration
	// QuarantineWindow and Quarantine: a module whose host dies twice within the window is not run for
	// Quarantine, doubled at every further quarantine up to 30 minutes.
	QuarantineWindow time.Duration
	Quarantine       time.Duration
	// Permanent says whether a module's failure to load will not pass by retrying, so that the failure is
	// remembered (see Failed) and its module not loaded again until Unload. Nil: only modules wazero
	// refuses to compile are remembered.
	Permanent func(error) bool
	// Hooks receive the hosts' runtime events (compiles, calls, guest output), as if the runtime were local.
	Hooks runtime.Hooks
	// Registerer gets the supervisor's metrics; nil registers none.
	Registerer prometheus.Registerer
	Log        logr.Logger
}

func (c Config) withDefaults() (Config, error) {
	if c.Executable == "" {
		exe, err := os.Executable()
		if err != nil {
			return c, fmt.Errorf("finding the executable to start plugin hosts from: %w", err)
		}
		c.Executable = hostExecutable(exe)
	}
	if c.Host.Timeout <= 0 {
		c.Host.Timeout = runtime.DefaultTimeout
	}
	if c.Grace <= 0 {
		c.Grace = DefaultGrace
	}
	if c.LoadTimeout <= 0 {
		c.LoadTimeout = DefaultLoadTimeout * slowdown
	}
	if c.WallFactor <= 0 {
		c.WallFactor = DefaultWallFactor
	}
	if c.MaxRSS == 0 {
		c.MaxRSS = DefaultMaxRSS
	}
	if c.IdleTimeout == 0 {
		c.IdleTimeout = DefaultIdleTimeout
	}
	if c.MaxHosts <= 0 {
		c.MaxHosts = DefaultMaxHosts
	}
	if c.MaxHostsPerNamespace <= 0 {
		c.MaxHostsPerNamespace = DefaultMaxHostsPerNamespace
	}
	if c.MaxBuiltinModules <= 0 {
		c.MaxBuiltinModules = DefaultMaxBuiltinModules
	}
	if c.TenantNice == 0 {
		c.TenantNice = DefaultTenantNice
	}
	if c.WatchInterval <= 0 {
		c.WatchInterval = DefaultWatchInterval
	}
	if c.QuarantineWindow <= 0 {
		c.QuarantineWindow = DefaultQuarantineWindow
	}
	if c.Quarantine <= 0 {
		c.Quarantine = DefaultQuarantine
	}
	return c, nil
}

// hostExecutable is the dedicated host next to exe if there is one, else exe. The dedicated host links the
// runtime alone, which spares each host the controller's libraries, their initialisation and the pages of a
// 100 MB executable.
func hostExecutable(exe string) string {
	sibling := filepath.Join(filepath.Dir(exe), HostExecutable)
	if fi, err := os.Stat(sibling); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
		return sibling
	}
	return exe
}

// Module names a module and how to get its bytes, which the supervisor sends to a host that lacks it (a
// host restarted after a kill starts empty).
type Module struct {
	Name   string
	Digest string
	// Builtin marks a module shipped inside the controller's executable: the built-in modules share one
	// trusted host. Any other module runs in a host of its own.
	Builtin bool
	// Namespace is the namespace whose profile first named the module: its host counts against that
	// namespace's bound (Config.MaxHostsPerNamespace). Empty: the global bound only.
	Namespace string
	// File, if set, is where a host can read the module itself, so the supervisor sends no bytes: a built-in
	// module inside the controller's executable. A host that cannot read it there, or finds other bytes
	// (the executable was replaced on disk), gets the module from Bytes.
	File *File
	// Bytes returns the module's bytes and a function to call once they are no longer needed.
	Bytes func() ([]byte, func(), error)
}

// hostKey names the host m runs in.
func hostKey(m Module) string {
	if m.Builtin {
		return builtinKey
	}
	return m.Digest
}

// builtinKey is the built-in host's key; no digest looks like it.
const builtinKey = "builtin"

// File is a range of a file that holds a module.
type File struct {
	Path   string `json:"path"`
	Offset int64  `json:"offset"`
	Length int64  `json:"length"`
}

// LoadResult is what a loaded module declared.
type LoadResult struct {
	Metadata  abi.Metadata
	Validates bool
	Encodes   bool
}

// Supervisor runs plugin operations in host processes. It is safe for concurrent use.
type Supervisor struct {
	cfg     Config
	log     logr.Logger
	metrics *metrics

	mu    sync.Mutex
	hosts map[string]*host
	// freed is closed (and replaced) when a tenant's host stops or becomes idle, for operations waiting for
	// room under MaxHosts.
	freed            chan struct{}
	closed           bool
	strikes          map[string]*record
	lastStartFailure time.Time

	// compiled holds the digests of the files each tenant's module's compile process wrote (compile.go),
	// recorded before any host ran from them; compiles are the compile processes in flight, and compileSlots and nsCompiles bound the compile processes alive.
	compiled map[string]Artifacts
	// failed remembers the modules that failed to load for a reason retrying will not fix (Config.Permanent,
	// or a compile wazero refused), at most maxFailures of them.
	failed map[string]error
	// builtinStamps are the stamps of the built-in host's cache (BuiltinDir), taken once, when the first
	// built-in host starts (with s.mu held: once per supervisor, where that host would have hashed them).
	// Taking them in the background from New competed with the controller's own start for the CPU and
	// delayed the first render (make bench-compare at N=1).
	stampOnce     sync.Once
	builtinStamps Stamps
	compiles      map[string]*compileState
	compileSlots  chan struct{}
	nsCompiles    map[string]chan struct{}
	// scratch is the cache directory made for the hosts when Config.Host.CacheDir is empty, removed at Close.
	scratch string
}

// host is a running host process and the operations using it.
type host struct {
	key   string
	ns    string
	p     *proc
	users int
	used  time.Time
	idle  *time.Timer
}

// record is a module's history of killing its host.
type record struct {
	deaths      []time.Time
	quarantines int
	until       time.Time
	cause       string
}

// New creates a Supervisor. No host starts until the first operation.
func New(cfg Config) (*Supervisor, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	met, err := newMetrics(cfg.Registerer)
	if err != nil {
		return nil, err
	}
	s := &Supervisor{cfg: cfg, log: cfg.Log, metrics: met, hosts: map[string]*host{}, freed: make(chan struct{}),
		strikes: map[string]*record{}, compiled: map[string]Artifacts{}, compiles: map[string]*compileState{},
		failed: map[string]error{}, compileSlots: make(chan struct{}, cfg.MaxHosts), nsCompiles: map[string]chan struct{}{}}
	if cfg.Host.CacheDir == "" {
		// Tenants' modules are compiled by processes that run no guest code, into a cache their hosts read.
		if s.scratch, err = os.MkdirTemp("", "osm-plugin-cache-"); err != nil {
			return nil, err
		}
		s.cfg.Host.CacheDir = s.scratch
	}
	return s, nil
}

// stampBuiltins takes the stamps of the built-in host's cache (Stamp).
func (s *Supervisor) stampBuiltins() {
	if len(s.cfg.Host.Artifacts) > 0 {
		s.builtinStamps = stampArtifacts(BuiltinDir(s.cfg.Host.CacheDir), s.cfg.Host.Artifacts)
	}
}

// Load loads m into its host and returns what it declared.
func (s *Supervisor) Load(ctx context.Context, m Module) (LoadResult, error) {
	var res LoadResult
	err := s.run(ctx, m, "load", func(p *proc) error {
		ls, err := p.use(ctx, m)
		if err != nil {
			return err
		}
		res = ls.res
		p.done(ls)
		return nil
	})
	return res, err
}

// Call runs export of m on input in and returns its output.
func (s *Supervisor) Call(ctx context.Context, m Module, export string, in []byte) ([]byte, error) {
	var out []byte
	err := s.run(ctx, m, export, func(p *proc) error {
		var err error
		out, err = p.call(ctx, m, export, in)
		return err
	})
	return out, err
}

// maxRetries bounds how often an operation of a built-in module follows a built-in host that another
// operation killed.
const maxRetries = 3

// run runs op on m's host and decides what the host's death under it means for its caller. A tenant's
// host runs one module: its death fails every operation in flight there with its reason. The built-in host
// runs the built-ins: the operations it was killed for fail, the others run again on a fresh one.
func (s *Supervisor) run(ctx context.Context, m Module, what string, op func(*proc) error) error {
	for attempt := 0; ; attempt++ {
		if err := s.Failed(m.Digest); err != nil {
			return err
		}
		if err := s.quarantined(m); err != nil {
			return err
		}
		if err := s.prepare(ctx, m); err != nil {
			return err
		}
		h, err := s.acquire(ctx, m)
		if errors.Is(err, errNotCompiled) && attempt < maxRetries {
			continue
		}
		if err != nil {
			return err
		}
		err = op(h.p)
		s.release(h)
		var hd *hostDied
		if !errors.As(err, &hd) {
			return err
		}
		d := hd.death
		fail := &runtime.Error{Plugin: m.Name, Digest: m.Digest, Export: what, Reason: d.reason, Detail: d.cause}
		switch {
		case d.unstarted:
			// No module is to blame; the next operation tries a new host, after a pause that keeps a host
			// that cannot start from being restarted in a loop.
			s.startFailed()
			return fail
		case d.reason == runtime.ReasonClosed && s.isClosed():
			return fail
		case d.reason == ReasonCacheTampered && attempt < maxRetries:
			// The host found its code changed before it read any: compile it again (prepare).
			s.forgetCompiled(m.Digest)
			s.metrics.retries.Inc()
			continue
		case d.reason == runtime.ReasonClosed, m.Builtin && !hd.culprit && attempt < maxRetries:
			// Stopped under it (evicted, unloaded), or the built-in host was killed for another operation.
			s.metrics.retries.Inc()
			continue
		default:
			return fail
		}
	}
}

func (s *Supervisor) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// errNotCompiled: a tenant's module has no recorded compiled code to start a host over.
var errNotCompiled = &runtime.Error{Reason: ReasonCacheTampered, Detail: "the module's compiled code changed while its plugin host was starting"}

// startBackoff is how long after a host failed to start no new one is started.
const startBackoff = time.Second

func (s *Supervisor) startFailed() {
	s.mu.Lock()
	s.lastStartFailure = time.Now()
	s.mu.Unlock()
}

// acquire returns m's running host, starting one if there is none, for an operation that calls release
// when it ends. Past MaxHosts tenants' hosts, the least recently used idle one stops; when none is idle, it
// waits for one, at most for a load's wall-clock cap.
func (s *Supervisor) acquire(ctx context.Context, m Module) (*host, error) {
	key := hostKey(m)
	var giveUp <-chan time.Time
	for {
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			return nil, &runtime.Error{Plugin: m.Name, Digest: m.Digest, Reason: runtime.ReasonClosed, Detail: "the plugin host supervisor is closed"}
		}
		if h := s.hosts[key]; h != nil && !isDead(h.p) {
			h.users++
			s.mu.Unlock()
			return h, nil
		}
		if wait := startBackoff - time.Since(s.lastStartFailure); wait > 0 {
			s.mu.Unlock()
			return nil, &runtime.Error{Plugin: m.Name, Digest: m.Digest, Reason: ReasonHostCrashed, Detail: fmt.Sprintf("a plugin host failed to start less than %s ago; retrying in %s", startBackoff, wait.Round(time.Millisecond))}
		}
		if full, victim := s.fullLocked(m); full {
			if victim != nil {
				delete(s.hosts, victim.key)
				go func() {
					s.unloaded(victim.p.loadedCount())
					victim.p.stop(fmt.Sprintf("evicted: more than %d plugin hosts, or %d of one namespace", s.cfg.MaxHosts, s.cfg.MaxHostsPerNamespace))
				}()
				s.mu.Unlock()
				continue
			}
			freed := s.freed
			s.mu.Unlock()
			if giveUp == nil {
				t := time.NewTimer(s.wallCap(s.cfg.LoadTimeout))
				defer t.Stop()
				giveUp = t.C
			}
			select {
			case <-freed:
				continue
			case <-ctx.Done():
				return nil, &runtime.Error{Plugin: m.Name, Digest: m.Digest, Reason: runtime.ReasonCanceled, Detail: "waiting for a plugin host: " + ctx.Err().Error(), Err: ctx.Err()}
			case <-giveUp:
				return nil, &runtime.Error{Plugin: m.Name, Digest: m.Digest, Reason: runtime.ReasonTimeout, Detail: fmt.Sprintf("the plugin hosts for tenants' modules (at most %d, %d per namespace) stayed busy for %s", s.cfg.MaxHosts, s.cfg.MaxHostsPerNamespace, s.wallCap(s.cfg.LoadTimeout))}
			}
		}
		if !m.Builtin && s.compiled[key] == nil {
			// Its record was dropped (the code changed) since prepare: compile again before any host starts.
			s.mu.Unlock()
			return nil, errNotCompiled
		}
		p, err := s.startProc(key, m)
		if err != nil {
			s.mu.Unlock()
			return nil, err
		}
		h := &host{key: key, ns: m.Namespace, p: p, users: 1}
		s.hosts[key] = h
		s.mu.Unlock()
		go s.reap(h)
		return h, nil
	}
}

// fullLocked reports whether a host for m must wait for room: its namespace has MaxHostsPerNamespace hosts,
// or the tenants have MaxHosts. victim is then the least recently used idle host of the namespace, or of all
// tenants, to stop; nil when every one is busy. The built-in host needs no room. Called with s.mu held.
func (s *Supervisor) fullLocked(m Module) (full bool, victim *host) {
	if m.Builtin {
		return false, nil
	}
	tenants, own := 0, 0
	for _, h := range s.hosts {
		if h.key != builtinKey {
			tenants++
			if m.Namespace != "" && h.ns == m.Namespace {
				own++
			}
		}
	}
	switch {
	case own >= s.cfg.MaxHostsPerNamespace:
		return true, s.leastRecentlyUsedIdleLocked(func(h *host) bool { return h.ns == m.Namespace })
	case tenants >= s.cfg.MaxHosts:
		return true, s.leastRecentlyUsedIdleLocked(func(*host) bool { return true })
	}
	return false, nil
}

// leastRecentlyUsedIdleLocked returns the tenant's host without operations used least recently among those
// of, or nil.
func (s *Supervisor) leastRecentlyUsedIdleLocked(of func(*host) bool) *host {
	var lru *host
	for _, h := range s.hosts {
		if h.key != builtinKey && h.users == 0 && of(h) && (lru == nil || h.used.Before(lru.used)) {
			lru = h
		}
	}
	return lru
}

// signalFreedLocked wakes the operations waiting for room under MaxHosts. Called with s.mu held.
func (s *Supervisor) signalFreedLocked() {
	close(s.freed)
	s.freed = make(chan struct{})
}

// release ends an operation on h; the last one to end starts the idle countdown.
func (s *Supervisor) release(h *host) {
	s.mu.Lock()
	defer s.mu.Unlock()
	h.users--
	h.used = time.Now()
	if h.users > 0 {
		return
	}
	s.signalFreedLocked()
	if s.cfg.IdleTimeout < 0 {
		return
	}
	if h.idle == nil {
		h.idle = time.AfterFunc(s.cfg.IdleTimeout, func() { s.stopIdle(h) })
	} else {
		h.idle.Reset(s.cfg.IdleTimeout)
	}
}

// stopIdle stops h if no operation has used it for IdleTimeout. An operation that starts later gets a new
// host: acquire no longer finds this one.
func (s *Supervisor) stopIdle(h *host) {
	s.mu.Lock()
	if s.hosts[h.key] != h || h.users > 0 {
		s.mu.Unlock()
		return
	}
	if left := s.cfg.IdleTimeout - time.Since(h.used); left > 0 {
		h.idle.Reset(left)
		s.mu.Unlock()
		return
	}
	delete(s.hosts, h.key)
	s.signalFreedLocked()
	s.mu.Unlock()
	s.unloaded(h.p.loadedCount())
	h.p.stop("plugin host idle for " + s.cfg.IdleTimeout.String())
}

// reap forgets h once its process ended. The death of a tenant's host was counted against its module by
// then (proc.read): once per death, whatever number of operations it had in flight.
func (s *Supervisor) reap(h *host) {
	<-h.p.dead
	s.mu.Lock()
	if s.hosts[h.key] == h {
		delete(s.hosts, h.key)
	}
	if h.idle != nil {
		h.idle.Stop()
	}
	s.signalFreedLocked()
	s.mu.Unlock()
	s.countLoaded()
}

func isDead(p *proc) bool {
	select {
	case <-p.dead:
		return true
	default:
		return false
	}
}

// strike counts a death of the host of the module with the digest; the second within QuarantineWindow
// quarantines it.
func (s *Supervisor) strike(digest, name string, d *death) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.strikes[digest]
	if r == nil {
		if len(s.strikes) >= maxRecords {
			s.dropOldestRecordLocked()
		}
		r = &record{}
		s.strikes[digest] = r
	}
	now := time.Now()
	kept := r.deaths[:0]
	for _, t := range r.deaths {
		if now.Sub(t) < s.cfg.QuarantineWindow {
			kept = append(kept, t)
		}
	}
	r.deaths = append(kept, now)
	r.cause = d.cause
	if len(r.deaths) >= 2 {
		r.until = now.Add(min(s.cfg.Quarantine<<r.quarantines, maxQuarantine))
		r.quarantines++
		r.deaths = nil
		s.metrics.quarantines.Inc()
		s.log.Info("plugin module quarantined: its plugin host died twice", "plugin", name, "digest", digest, "until", r.until.UTC().Format(time.RFC3339), "cause", d.cause)
	}
}

// maxRecords bounds the modules whose host deaths are remembered.
const maxRecords = 1024

func (s *Supervisor) dropOldestRecordLocked() {
	var oldest string
	var at time.Time
	for k, r := range s.strikes {
		t := r.until
		if len(r.deaths) > 0 && r.deaths[len(r.deaths)-1].After(t) {
			t = r.deaths[len(r.deaths)-1]
		}
		if oldest == "" || t.Before(at) {
			oldest, at = k, t
		}
	}
	delete(s.strikes, oldest)
}

// quarantined returns the error for a module in quarantine, or nil. A built-in module is never quarantined.
func (s *Supervisor) quarantined(m Module) error {
	if m.Builtin {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.strikes[m.Digest]
	if r == nil || !time.Now().Before(r.until) {
		return nil
	}
	return &runtime.Error{Plugin: m.Name, Digest: m.Digest, Reason: ReasonQuarantined,
		Detail: fmt.Sprintf("quarantined until %s: its plugin host died twice within %s (last: %s)",
			r.until.UTC().Format(time.RFC3339), s.cfg.QuarantineWindow, r.cause)}
}

// Unload drops the module unless an operation uses it: a tenant's host stops, the built-in host forgets it.
// It also forgets a remembered failure of the module.
func (s *Supervisor) Unload(digest string) {
	s.mu.Lock()
	delete(s.failed, digest)
	h := s.hosts[digest]
	stop := h != nil && h.users == 0
	if stop {
		delete(s.hosts, digest)
		s.signalFreedLocked()
	} else if h == nil {
		h = s.hosts[builtinKey]
	}
	s.mu.Unlock()
	switch {
	case stop:
		s.unloaded(h.p.loadedCount())
		h.p.stop("module unloaded")
	case h != nil && h.key == builtinKey && h.p.unload(digest, 0):
		s.unloaded(1)
	}
}

// Failed returns the remembered failure to load the module with the digest, or nil.
func (s *Supervisor) Failed(digest string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.failed[digest]
}

// maxFailures bounds the remembered load failures.
const maxFailures = 256

// rememberFailure remembers a failure to load m that retrying will not fix: wazero refused it (reason
// InvalidModule, from its compile process), or Config.Permanent says so.
func (s *Supervisor) rememberFailure(m Module, err error, compiled bool) {
	refused := compiled && runtime.ReasonOf(err) == runtime.ReasonInvalidModule
	if !refused && (s.cfg.Permanent == nil || !s.cfg.Permanent(err)) {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.failed) >= maxFailures {
		for k := range s.failed {
			delete(s.failed, k)
			break
		}
	}
	s.failed[m.Digest] = err
}

// Loaded counts the modules loaded, or being loaded, in the running hosts.
func (s *Supervisor) Loaded() int {
	s.mu.Lock()
	hosts := make([]*host, 0, len(s.hosts))
	for _, h := range s.hosts {
		hosts = append(hosts, h)
	}
	s.mu.Unlock()
	n := 0
	for _, h := range hosts {
		n += h.p.loadedCount()
	}
	return n
}

// countLoaded sets the loaded-modules gauge.
func (s *Supervisor) countLoaded() { s.metrics.loaded.Set(float64(s.Loaded())) }

// unloaded counts n modules unloaded (a host stopped, or the built-in host forgot one).
func (s *Supervisor) unloaded(n int) {
	if n > 0 {
		s.metrics.unloads.Add(float64(n))
		s.countLoaded()
	}
}

// PIDs returns the process IDs of the running hosts (for tests and diagnostics).
func (s *Supervisor) PIDs() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	var pids []int
	for _, h := range s.hosts {
		if !isDead(h.p) {
			pids = append(pids, h.p.cmd.Process.Pid)
		}
	}
	return pids
}

// HostPID returns the process ID of the running host of m, or 0 (for tests and diagnostics).
func (s *Supervisor) HostPID(m Module) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if h := s.hosts[hostKey(m)]; h != nil && !isDead(h.p) {
		return h.p.cmd.Process.Pid
	}
	return 0
}

// Close stops the hosts; operations in flight fail with ReasonClosed.
func (s *Supervisor) Close() {
	s.mu.Lock()
	s.closed = true
	hosts := make([]*host, 0, len(s.hosts))
	for _, h := range s.hosts {
		hosts = append(hosts, h)
		if h.idle != nil {
			h.idle.Stop()
		}
	}
	s.mu.Unlock()
	var wg sync.WaitGroup
	for _, h := range hosts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			h.p.stop("plugin host supervisor closed")
		}()
	}
	wg.Wait()
	if s.scratch != "" {
		_ = os.RemoveAll(s.scratch)
	}
}

// wallCap is the wall-clock cap of an operation with the CPU budget.
func (s *Supervisor) wallCap(budget time.Duration) time.Duration {
	return budget * time.Duration(s.cfg.WallFactor)
}
