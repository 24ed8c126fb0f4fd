// Package pluginhost runs plugins in a separate process that the operating system bounds, and supervises it.
//
// The controller, its webhooks and osmctl never compile or run guest code. A Supervisor starts a plugin host
// (the same executable, turned into a host by an environment variable: see init) and talks to it over a pipe
// pair with the ABI's JSON (wire.go). What bounds a guest is enforced from outside the host, where the guest
// cannot reach:
//
//   - time: every operation has a deadline (the call timeout plus a grace, or the load timeout); past it the
//     supervisor kills the host with SIGKILL. Inside the host, wazero's close-on-context-done usually ends the
//     call on time, but nothing depends on it: bulk memory operations and host calls ignore it, and a guest in
//     machine code can hold up the host's garbage collector, so a stuck host cannot even answer.
//   - memory: the host's RSS is polled (Config.MaxRSS) and the host killed above it; its address space is
//     capped with RLIMIT_AS, and it offers itself to the kernel's OOM killer first (oom_score_adj 1000).
//   - blame: an operation past its deadline, or the only one in flight when the host died, is the culprit and
//     fails with a reason. The others in flight are retried: on a fresh host when the culprit is known, and
//     otherwise one at a time on a probation host, where a second death names the culprit for sure. Guest
//     machine code holds its thread until it returns, so a few spinning calls starve the rest of the host,
//     which overrun with them: of the operations near their deadlines, the culprits are the calls whose
//     thread in the host spent the time on a CPU, by the kernel's accounting (proc.overdue).
//   - repetition: a module that kills its host twice within QuarantineWindow is quarantined by digest, its
//     calls failing at once for a while that doubles each time, so it cannot keep the host down for others.
//
// The design follows HashiCorp go-plugin and Crossplane functions (third-party logic in its own process,
// killed by the host when it misbehaves); the supervisor is written here because what it needs beyond
// starting a process (per-call deadlines, an RSS watchdog, retry and attribution, quarantine) is the part
// those libraries leave to the caller.
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

	"github.com/osmhq/osm/host/internal/metricsreg"
	"github.com/osmhq/osm/sdk/abi"
	"github.com/osmhq/osm/sdk/runtime"
)

// Reasons a supervisor adds to sdk/runtime's.
const (
	// ReasonHostCrashed: the plugin host died while this operation was the one to blame (a crash of the
	// runtime, an allocation past RLIMIT_AS).
	ReasonHostCrashed runtime.Reason = "HostCrashed"
	// ReasonQuarantined: the module killed its plugin host repeatedly and is not run for a while.
	ReasonQuarantined runtime.Reason = "Quarantined"
)

// HostExecutable is the name of the dedicated plugin host (cmd/osm-plugin-host) next to the controller.
const HostExecutable = "osm-plugin-host"

// Defaults for Config fields left zero.
const (
	DefaultGrace = 2 * time.Second
	// DefaultLoadTimeout bounds checking, snapshotting and compiling a module: a default plugin takes 2–4 s
	// cold on an idle core and a tenth of a second from the disk cache, and a busy machine many times that.
	// The module's own code that a load runs (its initialisation while it is snapshotted, and once compiled
	// the osm_metadata call that completes the load) gets a call's deadline instead (proc.progress).
	DefaultLoadTimeout      = time.Minute
	DefaultMaxRSS           = 768 << 20
	DefaultWatchInterval    = 100 * time.Millisecond
	DefaultQuarantineWindow = 10 * time.Minute
	DefaultQuarantine       = time.Minute
	maxQuarantine           = 30 * time.Minute
	// probationIdle stops a probation host nobody used for this long.
	probationIdle = 30 * time.Second
	// DefaultIdleTimeout stops the main host once no operation has used it for this long. Renders that the
	// output memo answers never reach the host, so after a burst of new configurations it has nothing to do,
	// and a host holds 40 MiB and more (compiled machine code: ~18 MiB per default plugin). The next
	// operation starts a new one, which loads its modules from the compilation cache: a render that starts
	// a host took 110–210 ms in make bench-compare at N=1. Short, because the renders of a burst come
	// milliseconds apart, while the controller's own memory peaks at the end of the burst: with 500 ms
	// instead of 2 s (and plugin.DefaultIdleTimeout likewise), a start of 500 MachineDeployments peaked at
	// 110 instead of 113 MiB with one OS and at 126 instead of 173 MiB with five (make bench-compare,
	// 2026-11-27).
	DefaultIdleTimeout = 500 * time.Millisecond
)

// Config configures a Supervisor.
type Config struct {
	// Host is the host processes' configuration.
	Host HostConfig
	// Executable is the binary started as a host; it must link this package. Default: HostExecutable next to
	// this process's executable if there is one (the image ships it), else this process's own.
	Executable string
	// Grace is how long past the call timeout a call may run before its host is killed. Default DefaultGrace.
	Grace time.Duration
	// LoadTimeout bounds loading (checking, compiling, initialising) a module. Default DefaultLoadTimeout.
	LoadTimeout time.Duration
	// MaxRSS kills a host whose resident memory exceeds it, in bytes. Default DefaultMaxRSS; negative: none.
	MaxRSS uint64
	// IdleTimeout stops the main host when no operation used it for this long. Default DefaultIdleTimeout;
	// negative: never.
	IdleTimeout time.Duration
	// WatchInterval is how often deadlines and memory are checked. Default DefaultWatchInterval.
	WatchInterval time.Duration
	// QuarantineWindow and Quarantine: a module that kills its host twice within the window is not run for
	// Quarantine, doubled at every further quarantine up to 30 minutes.
	QuarantineWindow time.Duration
	Quarantine       time.Duration
	// Hooks receive the host's runtime events (compiles, calls, guest output), as if the runtime were local.
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
	if c.MaxRSS == 0 {
		c.MaxRSS = DefaultMaxRSS
	}
	if c.IdleTimeout == 0 {
		c.IdleTimeout = DefaultIdleTimeout
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

// Module names a module and how to get its bytes, which the supervisor sends to every host that lacks it
// (a host restarted after a kill starts empty).
type Module struct {
	Name   string
	Digest string
	// File, if set, is where a host can read the module itself, so the supervisor sends no bytes: a built-in
	// module inside the controller's executable. A host that cannot read it there, or finds other bytes
	// (the executable was replaced on disk), gets the module from Bytes.
	File *File
	// Bytes returns the module's bytes and a function to call once they are no longer needed.
	Bytes func() ([]byte, func(), error)
}

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

	mu               sync.Mutex
	main             *proc
	mainUsed         time.Time   // when the last operation on main ended
	idleStop         *time.Timer // stops main after IdleTimeout without operations
	closed           bool
	strikes          map[string]*record
	lastStartFailure time.Time

	// probationMu runs probation operations one at a time.
	probationMu   sync.Mutex
	probation     *proc
	probationUsed time.Time
	probationStop *time.Timer
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
	return &Supervisor{cfg: cfg, log: cfg.Log, metrics: met, strikes: map[string]*record{}}, nil
}

// startBackoff is how long after a host failed to start no new one is started.
const startBackoff = time.Second

func (s *Supervisor) startFailed() {
	s.mu.Lock()
	s.lastStartFailure = time.Now()
	s.mu.Unlock()
}

// acquireMain returns the running main host, starting one if there is none, for an operation that calls
// releaseMain when it ends.
func (s *Supervisor) acquireMain() (*proc, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, err := s.mainProcLocked()
	if err == nil {
		p.users++
	}
	return p, err
}

// releaseMain ends an operation on p; the last one to end starts the idle countdown.
func (s *Supervisor) releaseMain(p *proc) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p.users--
	if p != s.main || p.users > 0 || s.cfg.IdleTimeout < 0 {
		return
	}
	s.mainUsed = time.Now()
	if s.idleStop == nil {
		s.idleStop = time.AfterFunc(s.cfg.IdleTimeout, s.stopIdle)
	} else {
		s.idleStop.Reset(s.cfg.IdleTimeout)
	}
}

// stopIdle stops the main host if no operation has used it for IdleTimeout. An operation that starts later
// gets a new host: acquireMain no longer finds this one.
func (s *Supervisor) stopIdle() {
	s.mu.Lock()
	p := s.main
	if p == nil || p.users > 0 {
		s.mu.Unlock()
		return
	}
	if left := s.cfg.IdleTimeout - time.Since(s.mainUsed); left > 0 {
		s.idleStop.Reset(left)
		s.mu.Unlock()
		return
	}
	s.main = nil
	s.mu.Unlock()
	p.stop("plugin host idle for " + s.cfg.IdleTimeout.String())
}

// mainProcLocked returns the running main host, starting one if there is none. Called with s.mu held.
func (s *Supervisor) mainProcLocked() (*proc, error) {
	if s.closed {
		return nil, &runtime.Error{Reason: runtime.ReasonClosed, Detail: "the plugin host supervisor is closed"}
	}
	if s.main != nil {
		select {
		case <-s.main.dead:
		default:
			return s.main, nil
		}
	}
	if wait := startBackoff - time.Since(s.lastStartFailure); wait > 0 {
		return nil, &runtime.Error{Reason: ReasonHostCrashed, Detail: fmt.Sprintf("the plugin host failed to start less than %s ago; retrying in %s", startBackoff, wait.Round(time.Millisecond))}
	}
	p, err := s.startProc("main")
	if err != nil {
		return nil, err
	}
	s.main = p
	return p, nil
}

// Load loads m into the main host and returns what it declared.
func (s *Supervisor) Load(ctx context.Context, m Module) (LoadResult, error) {
	var res LoadResult
	err := s.run(ctx, m, "load", func(p *proc) error {
		var err error
		res, err = p.ensureLoaded(ctx, m)
		return err
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

// maxRetries bounds how often one operation follows a host that others killed.
const maxRetries = 3

// run runs op on the main host, and decides what a host's death under it means for its caller.
func (s *Supervisor) run(ctx context.Context, m Module, what string, op func(*proc) error) error {
	for attempt := 0; ; attempt++ {
		if err := s.quarantined(m); err != nil {
			return err
		}
		p, err := s.acquireMain()
		if err != nil {
			return err
		}
		err = op(p)
		s.releaseMain(p)
		var hd *hostDied
		if !errors.As(err, &hd) {
			return err
		}
		switch {
		case hd.death.reason == runtime.ReasonClosed:
			return &runtime.Error{Plugin: m.Name, Digest: m.Digest, Export: what, Reason: runtime.ReasonClosed, Detail: hd.death.cause}
		case hd.death.unstarted:
			// No module is to blame; the next operation tries a new host, after a pause that keeps a host
			// that cannot start from being restarted in a loop.
			s.startFailed()
			return &runtime.Error{Plugin: m.Name, Digest: m.Digest, Export: what, Reason: ReasonHostCrashed, Detail: hd.death.cause}
		case hd.culprit:
			return s.blame(m, what, hd.death)
		case hd.suspect:
			// It overran beside another module's operation: alone, overrunning is its own doing.
			s.metrics.retries.Inc()
			return s.onProbation(ctx, m, what, op)
		case len(hd.death.culprits)+len(hd.death.suspects) > 0 && attempt < maxRetries:
			// Another operation was to blame; this one runs again on a fresh host.
			s.metrics.retries.Inc()
			continue
		default:
			// Nobody in particular was to blame: run alone, where a second death is this operation's doing.
			s.metrics.retries.Inc()
			return s.onProbation(ctx, m, what, op)
		}
	}
}

// onProbation runs op on the probation host, one operation at a time.
func (s *Supervisor) onProbation(ctx context.Context, m Module, what string, op func(*proc) error) error {
	s.probationMu.Lock()
	defer s.probationMu.Unlock()
	if err := s.quarantined(m); err != nil {
		return err
	}
	if s.probation == nil || isDead(s.probation) {
		s.mu.Lock()
		closed := s.closed
		s.mu.Unlock()
		if closed {
			return &runtime.Error{Reason: runtime.ReasonClosed, Detail: "the plugin host supervisor is closed"}
		}
		p, err := s.startProc("probation")
		if err != nil {
			return err
		}
		s.probation = p
	}
	s.probationUsed = time.Now()
	s.scheduleProbationStop()
	err := op(s.probation)
	var hd *hostDied
	if errors.As(err, &hd) {
		if hd.death.reason == runtime.ReasonClosed {
			return &runtime.Error{Plugin: m.Name, Digest: m.Digest, Export: what, Reason: runtime.ReasonClosed, Detail: hd.death.cause}
		}
		return s.blame(m, what, hd.death)
	}
	return err
}

// scheduleProbationStop stops the probation host once it has been idle for probationIdle. Called with
// probationMu held.
func (s *Supervisor) scheduleProbationStop() {
	if s.probationStop != nil {
		s.probationStop.Stop()
	}
	s.probationStop = time.AfterFunc(probationIdle, func() {
		s.probationMu.Lock()
		defer s.probationMu.Unlock()
		if s.probation != nil && time.Since(s.probationUsed) >= probationIdle {
			s.probation.stop("probation host idle")
			s.probation = nil
		}
	})
}

func isDead(p *proc) bool {
	select {
	case <-p.dead:
		return true
	default:
		return false
	}
}

// blame fails the culprit's operation and counts the death against its module.
func (s *Supervisor) blame(m Module, what string, d *death) error {
	s.mu.Lock()
	r := s.strikes[m.Digest]
	if r == nil {
		if len(s.strikes) >= maxRecords {
			s.dropOldestRecord()
		}
		r = &record{}
		s.strikes[m.Digest] = r
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
		s.log.Info("plugin module quarantined: it killed the plugin host twice", "plugin", m.Name, "digest", m.Digest, "until", r.until.UTC().Format(time.RFC3339), "cause", d.cause)
	}
	s.mu.Unlock()
	return &runtime.Error{Plugin: m.Name, Digest: m.Digest, Export: what, Reason: d.reason, Detail: d.cause}
}

// maxRecords bounds the modules whose host kills are remembered.
const maxRecords = 1024

func (s *Supervisor) dropOldestRecord() {
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

// quarantined returns the error for a module in quarantine, or nil.
func (s *Supervisor) quarantined(m Module) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.strikes[m.Digest]
	if r == nil || !time.Now().Before(r.until) {
		return nil
	}
	return &runtime.Error{Plugin: m.Name, Digest: m.Digest, Reason: ReasonQuarantined,
		Detail: fmt.Sprintf("quarantined until %s: it killed the plugin host %d times in %s (last: %s)",
			r.until.UTC().Format(time.RFC3339), 2*r.quarantines, s.cfg.QuarantineWindow, r.cause)}
}

// Unload tells every host to drop the module.
func (s *Supervisor) Unload(digest string) {
	s.mu.Lock()
	p := s.main
	s.mu.Unlock()
	if p != nil {
		p.unload(digest)
	}
	s.probationMu.Lock()
	if s.probation != nil {
		s.probation.unload(digest)
	}
	s.probationMu.Unlock()
}

// PIDs returns the process IDs of the running hosts (for tests and diagnostics).
func (s *Supervisor) PIDs() []int {
	var pids []int
	s.mu.Lock()
	if s.main != nil && !isDead(s.main) {
		pids = append(pids, s.main.cmd.Process.Pid)
	}
	s.mu.Unlock()
	s.probationMu.Lock()
	if s.probation != nil && !isDead(s.probation) {
		pids = append(pids, s.probation.cmd.Process.Pid)
	}
	s.probationMu.Unlock()
	return pids
}

// Close stops the hosts; operations in flight fail with ReasonClosed.
func (s *Supervisor) Close() {
	s.mu.Lock()
	s.closed = true
	p := s.main
	if s.idleStop != nil {
		s.idleStop.Stop()
	}
	s.mu.Unlock()
	if p != nil {
		p.stop("plugin host supervisor closed")
	}
	s.probationMu.Lock()
	if s.probationStop != nil {
		s.probationStop.Stop()
	}
	if s.probation != nil {
		s.probation.stop("plugin host supervisor closed")
	}
	s.probationMu.Unlock()
}

type metrics struct {
	starts      *prometheus.CounterVec
	deaths      *prometheus.CounterVec
	retries     prometheus.Counter
	quarantines prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		starts: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "osm_plugin_host_starts_total",
			Help: "Plugin host processes started (role main or probation)."}, []string{"role"}),
		deaths: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "osm_plugin_host_deaths_total",
			Help: "Plugin host processes that ended, by reason (Timeout and OutOfMemory: killed by the supervisor; HostCrashed; Closed: stopped)."}, []string{"role", "reason"}),
		retries: prometheus.NewCounter(prometheus.CounterOpts{Name: "osm_plugin_host_retries_total",
			Help: "Plugin operations run again because their host died under them for another operation."}),
		quarantines: prometheus.NewCounter(prometheus.CounterOpts{Name: "osm_plugin_quarantines_total",
			Help: "Plugin modules quarantined for killing their host repeatedly."}),
	}
	if reg == nil {
		return m, nil
	}
	var err error
	if m.starts, err = metricsreg.Register(reg, m.starts); err != nil {
		return nil, err
	}
	if m.deaths, err = metricsreg.Register(reg, m.deaths); err != nil {
		return nil, err
	}
	if m.retries, err = metricsreg.Register(reg, m.retries); err != nil {
		return nil, err
	}
	if m.quarantines, err = metricsreg.Register(reg, m.quarantines); err != nil {
		return nil, err
	}
	return m, nil
}

func (m *metrics) started(role string)      { m.starts.WithLabelValues(role).Inc() }
func (m *metrics) died(role, reason string) { m.deaths.WithLabelValues(role, reason).Inc() }
