package pluginhost

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/osmhq/osm/sdk/abi"
	"github.com/osmhq/osm/sdk/runtime"
)

// proc is one plugin host process and the operations in flight on it. It never outlives a failure: a host
// that dies, or is killed, is replaced by a new proc on the next operation.
type proc struct {
	s    *Supervisor
	role string // roleBuiltin or roleTenant
	// key and name are the host's key (a tenant's module digest) and its module's name.
	key, name string
	cmd       *exec.Cmd
	in        io.WriteCloser
	out       *frameWriter

	mu sync.Mutex
	// cpu is the host's CPU time at the last watch tick.
	cpu     time.Duration
	nextID  uint64
	pending map[uint64]*pending
	loaded  map[string]*loadState
	// ready is set once the host said it started.
	ready bool
	// death is set once, before dead is closed.
	death *death
	dead  chan struct{}

	stderr *tail
	// loading admits two loads at a time, as the host's runtime compiles two at a time, so a load's deadline
	// runs from when the host can work on it, not while it waits for a compile lane.
	loading chan struct{}
	// freed is closed, and replaced, whenever a module stops being used or goes: what a load waiting for room
	// in the built-in host (Config.MaxBuiltinModules) waits for.
	freed chan struct{}
}

// Roles of hosts, in metrics and logs.
const (
	roleBuiltin = "builtin"
	roleTenant  = "tenant"
)

// pending is an operation waiting for its reply, and the host CPU time charged to it.
type pending struct {
	id     uint64
	digest string
	what   string // "osm_render", "load", ...
	reply  chan reply
	// used is its share of the host's CPU time since it was sent; past cpuLimit, or past wallLimit whatever
	// it used, the host is killed.
	used      time.Duration
	cpuLimit  time.Duration
	wallLimit time.Time
	sent      time.Time
	// saved, while a load runs the module's initialisation, holds the load's own limits it returns to after.
	saved *limits
}

type limits struct {
	cpu  time.Duration
	wall time.Time
}

type reply struct {
	h       *header
	payload []byte
}

// loadState is a module loaded, or being loaded, in a host: the supervisor's record of what is loaded where.
type loadState struct {
	done chan struct{}
	res  LoadResult
	err  error
	// m is the module as it was loaded, for a host that must load it again (Supervisor.Module).
	m Module
	// calls counts the operations using the module now, the load included; used is when the last one ended.
	// The built-in host forgets a module unused for IdleTimeout (idle), never one in use.
	calls int
	used  time.Time
	idle  *time.Timer
}

// death says why a host ended. In a tenant's host every operation in flight was its module's; in the
// built-in host the culprits fail and the others run again.
type death struct {
	cause string
	// reason is the runtime.Reason the operations' callers get.
	reason runtime.Reason
	// unstarted says the host died before it started: the host's own failure.
	unstarted bool
	// culprits are the operations the host was killed for, or the only one in flight when it died.
	culprits map[uint64]bool
}

// startProc starts the host of key from the supervisor's executable; a tenant's host at a lower priority.
func (s *Supervisor) startProc(key string, m Module) (*proc, error) {
	role := roleTenant
	if key == builtinKey {
		role = roleBuiltin
	}
	cfgJSON, err := json.Marshal(s.hostConfig(key))
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(s.cfg.Executable)
	cmd.Args = []string{"osm-plugin-host"}
	cmd.Env = hostEnv(string(cfgJSON))
	// The host dies with its parent, so a controller killed without cleanup leaves no host behind.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting the plugin host %s: %w", s.cfg.Executable, err)
	}
	if role == roleTenant && s.cfg.TenantNice > 0 {
		// Before the host has a module: nothing of the tenant's runs at the controller's priority. Raising
		// one's child's nice value needs no privilege; failing to only loses the preference.
		if err := syscall.Setpriority(syscall.PRIO_PROCESS, cmd.Process.Pid, s.cfg.TenantNice); err != nil {
			s.log.V(1).Info("could not lower a plugin host's priority", "pid", cmd.Process.Pid, "error", err.Error())
		}
	}
	p := &proc{s: s, role: role, key: key, name: m.Name, cmd: cmd, in: stdin, out: &frameWriter{w: stdin},
		pending: map[uint64]*pending{}, loaded: map[string]*loadState{}, dead: make(chan struct{}), stderr: &tail{max: 4 << 10},
		loading: make(chan struct{}, 2), freed: make(chan struct{})}
	s.metrics.started(role)
	s.log.V(1).Info("plugin host started", "role", role, "plugin", m.Name, "digest", key, "pid", cmd.Process.Pid)
	go p.readStderr(stderr)
	go p.read(stdout)
	go p.watch()
	return p, nil
}

// hostConfig is the configuration of the host of key, called with s.mu held: the built-in host reads
// BuiltinDir (which the precompiled default plugins seed, their digests in Host.Artifacts), a tenant's host
// the directory its module's compile process filled (the digests recorded then), and neither writes anything.
func (s *Supervisor) hostConfig(key string) HostConfig {
	hc := s.cfg.Host
	hc.Role, hc.CacheDir = roleBuiltin, BuiltinDir(hc.CacheDir)
	s.stampOnce.Do(s.stampBuiltins)
	hc.Stamps = s.builtinStamps
	if key != builtinKey {
		// The module as its compile process compiled it: as it was built, not snapshotted (snapshotting runs
		// the module's code, which no process that writes the cache may do).
		hc.Role, hc.CacheDir, hc.NoSnapshot, hc.Artifacts, hc.Stamps = roleTenant, s.tenantDir(key), true, s.compiled[key], nil
	}
	hc.ReadOnlyCache = true
	hc.Landlock = !s.cfg.NoLandlock
	return hc
}

// hostEnv is the host's whole environment: its configuration and the few variables the Go runtime reads.
// Nothing else of the controller's environment (which may hold credentials) reaches a process running
// untrusted code.
func hostEnv(cfgJSON string) []string {
	env := []string{envConfig + "=" + cfgJSON}
	for _, k := range []string{"GOMAXPROCS", "GOGC", "GODEBUG", "GORACE", "GOTRACEBACK", "TMPDIR", "HOME", envCPUProfile} {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	return env
}

// read delivers replies and events until the host's stdout ends, then records its death.
func (p *proc) read(stdout io.Reader) {
	in := newFrameReader(stdout)
	for {
		h, payload, err := in.read()
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, os.ErrClosed) {
				// A frame past the wire's bound, or not a frame: the host no longer speaks the protocol.
				p.kill(&death{cause: "the plugin host broke the wire: " + truncate(err.Error(), 512), reason: ReasonHostCrashed})
			}
			break
		}
		switch h.Op {
		case opReady:
			p.mu.Lock()
			p.ready = true
			p.mu.Unlock()
		case opEvent:
			if h.Event != nil {
				p.progress(h.Event)
				h.Event.dispatch(p.s.cfg.Hooks)
			}
		case opReply:
			p.mu.Lock()
			pd := p.pending[h.ID]
			delete(p.pending, h.ID)
			p.mu.Unlock()
			if pd != nil {
				pd.reply <- reply{h: h, payload: payload}
			}
		}
	}
	waitErr := p.cmd.Wait()
	p.mu.Lock()
	if p.death == nil {
		d := &death{cause: "the plugin host died (" + exitText(waitErr) + ")", reason: ReasonHostCrashed}
		if line := p.stderr.fatal(); line != "" {
			d.cause += ": " + line
		}
		var ee *exec.ExitError
		if !p.ready && errors.As(waitErr, &ee) && ee.ExitCode() == exitTampered {
			d = &death{cause: "the plugin host found its module's compiled code changed since it was compiled", reason: ReasonCacheTampered, culprits: map[uint64]bool{}}
			if line := p.stderr.last(); strings.HasPrefix(line, tamperedPrefix) {
				d.cause = strings.TrimPrefix(line, "plugin host: ")
			}
		}
		p.death = d
	}
	d := p.death
	if !p.ready && d.reason == ReasonHostCrashed {
		// It never started: nothing it was asked to do is to blame.
		d.cause = "the plugin host did not start (" + strings.TrimPrefix(d.cause, "the plugin host died (")
		d.culprits, d.unstarted = map[uint64]bool{}, true
	}
	if d.culprits == nil {
		d.culprits = soleCulprit(p.pending)
	}
	p.mu.Unlock()
	_ = p.in.Close()
	if p.role == roleTenant && !d.unstarted && d.reason != runtime.ReasonClosed && d.reason != ReasonCacheTampered {
		// Before anyone hears of the death: the next operation must find the strike counted.
		p.s.strike(p.key, p.name, d)
	}
	p.s.metrics.died(p.role, string(d.reason))
	close(p.dead)
	log := p.s.log.V(1)
	if d.reason != runtime.ReasonClosed {
		log = p.s.log.V(0)
	}
	log.Info("plugin host ended", "role", p.role, "pid", p.cmd.Process.Pid, "cause", d.cause)
}

func exitText(err error) string {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return "killed by signal " + ws.Signal().String()
		}
		return "exit status " + strconv.Itoa(ee.ExitCode())
	}
	if err == nil {
		return "exited"
	}
	return err.Error()
}

// progress adjusts the limits of a module's loads as they go: a load runs the module's own code twice (its
// initialisation, to snapshot it, and the osm_metadata call once compiled), and each gets a call's budget
// instead of the load's, so that a module spinning in its _initialize cannot hold its host for the whole
// load budget. Between them the load returns to its own limits, never past them.
func (p *proc) progress(e *wireEvent) {
	if e.Err != nil {
		return
	}
	now := time.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, pd := range p.pending {
		if pd.what != opLoad || pd.digest != e.Digest {
			continue
		}
		switch e.Kind {
		case "initializing":
			pd.saved = &limits{cpu: pd.cpuLimit, wall: pd.wallLimit}
			p.limitToCall(pd, now)
		case "initialized":
			if pd.saved != nil {
				pd.cpuLimit, pd.wallLimit, pd.saved = pd.saved.cpu, pd.saved.wall, nil
			}
		case "compiled":
			p.limitToCall(pd, now)
		}
	}
}

// limitToCall gives pd no more than a call's budget from now on.
func (p *proc) limitToCall(pd *pending, now time.Time) {
	call := p.s.cfg.Host.Timeout + p.s.cfg.Grace
	pd.cpuLimit = min(pd.cpuLimit, pd.used+call)
	if wall := now.Add(p.s.wallCap(call)); wall.Before(pd.wallLimit) {
		pd.wallLimit = wall
	}
}

// watch enforces the limits of time and memory from outside the host: nothing the guest does inside can
// stop a SIGKILL.
func (p *proc) watch() {
	t := time.NewTicker(p.s.cfg.WatchInterval)
	defer t.Stop()
	for {
		select {
		case <-p.dead:
			return
		case now := <-t.C:
			cpu := processCPU(p.cmd.Process.Pid)
			p.mu.Lock()
			p.charge(cpu)
			d := p.overdue(now)
			n := len(p.pending)
			p.mu.Unlock()
			if d != nil {
				p.kill(d)
				return
			}
			if max := p.s.cfg.MaxRSS; max > 0 && n > 0 {
				if rss := residentBytes(p.cmd.Process.Pid); rss > max {
					p.kill(&death{cause: fmt.Sprintf("the plugin host grew to %d MiB, past its limit of %d MiB, and was killed", rss>>20, max>>20), reason: runtime.ReasonOutOfMemory})
					return
				}
			}
		}
	}
}

// charge shares the CPU time the host used since the last tick among the operations in flight: in a
// tenant's host they are all one module's; in the built-in host, an operation cannot use more than the
// host did. Called with p.mu held.
func (p *proc) charge(cpu time.Duration) {
	if cpu < 0 {
		return // unreadable: the wall-clock caps still hold
	}
	delta := cpu - p.cpu
	p.cpu = cpu
	if delta <= 0 || len(p.pending) == 0 {
		return
	}
	share := delta / time.Duration(len(p.pending))
	for _, pd := range p.pending {
		pd.used += share
	}
}

// overdue returns the death of a host with operations past their limits, or nil. Called with p.mu held.
func (p *proc) overdue(now time.Time) *death {
	culprits := map[uint64]bool{}
	var what []string
	for id, pd := range p.pending {
		if pd.used > pd.cpuLimit || now.After(pd.wallLimit) {
			culprits[id] = true
			what = append(what, fmt.Sprintf("%s: %s of CPU in %s", pd.what, pd.used.Round(time.Millisecond), now.Sub(pd.sent).Round(time.Millisecond)))
		}
	}
	if len(culprits) == 0 {
		return nil
	}
	slices.Sort(what)
	return &death{cause: "ran past its limit (" + strings.Join(what, "; ") + "); the plugin host was killed", reason: runtime.ReasonTimeout, culprits: culprits}
}

// kill ends the host with SIGKILL, recording why first.
func (p *proc) kill(d *death) {
	p.mu.Lock()
	if p.death == nil {
		if d.culprits == nil {
			d.culprits = soleCulprit(p.pending)
		}
		p.death = d
	}
	p.mu.Unlock()
	_ = p.cmd.Process.Kill()
}

// stop ends a host that is no longer wanted: its input closes, which ends it, and a host that has not
// ended a second later is killed.
func (p *proc) stop(cause string) {
	p.mu.Lock()
	if p.death == nil {
		p.death = &death{cause: cause, reason: runtime.ReasonClosed, culprits: map[uint64]bool{}}
	}
	p.mu.Unlock()
	_ = p.in.Close()
	select {
	case <-p.dead:
	case <-time.After(time.Second):
		_ = p.cmd.Process.Kill()
		<-p.dead
	}
}

// soleCulprit blames the only operation in flight, if there is exactly one: a death with one operation
// running is its doing. Called with p.mu held.
func soleCulprit(pending map[uint64]*pending) map[uint64]bool {
	blamed := map[uint64]bool{}
	if len(pending) == 1 {
		for id := range pending {
			blamed[id] = true
		}
	}
	return blamed
}

// hostDied is what an operation gets when its host died under it.
type hostDied struct {
	death   *death
	culprit bool
}

func (e *hostDied) Error() string { return e.death.cause }

// roundTrip sends one operation and waits for its reply, the host's death, or ctx. An operation abandoned
// by its caller stays tracked until it answers, so its deadline still holds the host to account.
func (p *proc) roundTrip(ctx context.Context, h *header, payload []byte, timeout time.Duration) (*header, []byte, error) {
	now := time.Now()
	pd := &pending{digest: h.Digest, what: h.Op, cpuLimit: timeout, wallLimit: now.Add(p.s.wallCap(timeout)), sent: now, reply: make(chan reply, 1)}
	if h.Op == opCall {
		pd.what = h.Export
	}
	p.mu.Lock()
	if p.death != nil {
		d := p.death
		p.mu.Unlock()
		return nil, nil, &hostDied{death: d}
	}
	p.nextID++
	pd.id, h.ID = p.nextID, p.nextID
	p.pending[pd.id] = pd
	p.mu.Unlock()
	if err := p.out.write(h, payload); err != nil {
		// The host is gone; its death is being recorded by read.
		<-p.dead
		return nil, nil, p.diedFor(pd.id)
	}
	select {
	case r := <-pd.reply:
		return r.h, r.payload, nil
	case <-p.dead:
		select {
		case r := <-pd.reply: // answered just before it died
			return r.h, r.payload, nil
		default:
		}
		return nil, nil, p.diedFor(pd.id)
	case <-ctx.Done():
		return nil, nil, &runtime.Error{Digest: h.Digest, Export: h.Export, Reason: runtime.ReasonCanceled, Detail: "canceled: " + context.Cause(ctx).Error(), Err: ctx.Err()}
	}
}

func (p *proc) diedFor(id uint64) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	d := p.death
	delete(p.pending, id)
	return &hostDied{death: d, culprit: d.culprits[id]}
}

// use loads m into this host once (concurrent callers wait for the first) and pins it for an operation,
// which calls done when it ends. A failure retrying will not fix is remembered (Supervisor.rememberFailure).
func (p *proc) use(ctx context.Context, m Module) (*loadState, error) {
	ls, ok, err := p.admit(ctx, m)
	if err != nil {
		return nil, err
	}
	if ok {
		select {
		case <-ls.done:
			if hit := p.s.cfg.Hooks.CacheHit; hit != nil && ls.err == nil {
				hit(runtime.LayerMemory)
			}
		case <-ctx.Done():
			p.done(ls)
			return nil, &runtime.Error{Plugin: m.Name, Digest: m.Digest, Reason: runtime.ReasonCanceled, Detail: "waiting for the module to load: " + ctx.Err().Error(), Err: ctx.Err()}
		}
	} else {
		ls.res, ls.err = p.load(ctx, m)
		if ls.err != nil {
			p.mu.Lock()
			if p.loaded[m.Digest] == ls {
				delete(p.loaded, m.Digest)
				p.signalFreedLocked()
			}
			p.mu.Unlock()
			p.s.rememberFailure(m, ls.err, false)
		}
		close(ls.done)
		p.s.countLoaded()
	}
	if ls.err != nil {
		p.done(ls)
		return nil, ls.err
	}
	return ls, nil
}

// admit returns m's record in this host, pinned for one operation (ok when it was loaded or being loaded
// already), or records m as being loaded. The built-in host holds at most MaxBuiltinModules modules: past it,
// the least recently used one that no operation has used for evictAfter is unloaded to make room; when none
// is, the load waits for one, within its load's wall-clock cap.
func (p *proc) admit(ctx context.Context, m Module) (*loadState, bool, error) {
	var giveUp <-chan time.Time
	for {
		p.mu.Lock()
		if ls, ok := p.loaded[m.Digest]; ok {
			ls.calls++
			p.mu.Unlock()
			return ls, true, nil
		}
		bound := p.s.cfg.MaxBuiltinModules
		if p.role != roleBuiltin || bound <= 0 || len(p.loaded) < bound {
			ls := &loadState{done: make(chan struct{}), m: m, calls: 1}
			p.loaded[m.Digest] = ls
			p.mu.Unlock()
			return ls, false, nil
		}
		victim, retry := p.evictableLocked()
		freed := p.freed
		p.mu.Unlock()
		if victim != "" {
			if p.unload(victim, 0) {
				p.s.unloaded(1)
			}
			continue
		}
		if giveUp == nil {
			t := time.NewTimer(p.s.wallCap(p.s.cfg.LoadTimeout))
			defer t.Stop()
			giveUp = t.C
		}
		if retry <= 0 {
			retry = evictAfter // nothing unused yet: look again when freed, or at the latest after this
		}
		again := time.NewTimer(retry)
		select {
		case <-freed:
		case <-again.C:
		case <-ctx.Done():
			return nil, false, &runtime.Error{Plugin: m.Name, Digest: m.Digest, Reason: runtime.ReasonCanceled, Detail: "waiting for room in the plugin host: " + ctx.Err().Error(), Err: ctx.Err()}
		case <-p.dead:
			return nil, false, &hostDied{death: p.death}
		case <-giveUp:
			return nil, false, &runtime.Error{Plugin: m.Name, Digest: m.Digest, Reason: runtime.ReasonTimeout, Detail: fmt.Sprintf("the built-in plugin host's %d modules stayed in use for %s", bound, p.s.wallCap(p.s.cfg.LoadTimeout))}
		}
		again.Stop()
	}
}

// evictAfter is how long a module must have been unused before another's load unloads it to make room. The
// operations of one render follow each other within microseconds; evicting between them would have the
// render load its module again.
const evictAfter = 50 * time.Millisecond

// evictableLocked returns the least recently used loaded module no operation has used for evictAfter, or,
// when none is, how long until the first unused one will be (0: none is unused).
func (p *proc) evictableLocked() (digest string, retry time.Duration) {
	var oldest *loadState
	for _, ls := range p.loaded {
		if ls.calls == 0 && ls.err == nil && (oldest == nil || ls.used.Before(oldest.used)) {
			oldest = ls
		}
	}
	if oldest == nil {
		return "", 0
	}
	if wait := evictAfter - time.Since(oldest.used); wait > 0 {
		return "", wait
	}
	return oldest.m.Digest, 0
}

// signalFreedLocked wakes the loads waiting for room. Called with p.mu held.
func (p *proc) signalFreedLocked() {
	close(p.freed)
	p.freed = make(chan struct{})
}

// done ends an operation's use of a module; in the built-in host, the last one starts its idle countdown.
func (p *proc) done(ls *loadState) {
	p.mu.Lock()
	defer p.mu.Unlock()
	ls.calls--
	ls.used = time.Now()
	if ls.calls == 0 {
		p.signalFreedLocked()
	}
	idle := p.s.cfg.IdleTimeout
	if ls.calls > 0 || ls.err != nil || p.role != roleBuiltin || idle < 0 {
		return
	}
	if ls.idle == nil {
		ls.idle = time.AfterFunc(idle, func() {
			if p.unload(ls.m.Digest, idle) {
				p.s.unloaded(1)
			}
		})
	} else {
		ls.idle.Reset(idle)
	}
}

// loadedCount counts the modules loaded, or being loaded, in a live host.
func (p *proc) loadedCount() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.death != nil {
		return 0
	}
	return len(p.loaded)
}

func (p *proc) load(ctx context.Context, m Module) (LoadResult, error) {
	select {
	case p.loading <- struct{}{}:
		defer func() { <-p.loading }()
	case <-ctx.Done():
		return LoadResult{}, &runtime.Error{Plugin: m.Name, Digest: m.Digest, Reason: runtime.ReasonCanceled, Detail: "waiting to load: " + ctx.Err().Error(), Err: ctx.Err()}
	case <-p.dead:
		return LoadResult{}, &hostDied{death: p.death}
	}
	h, err := p.loadFrom(ctx, m)
	if err != nil {
		return LoadResult{}, err
	}
	if h.Err != nil {
		return LoadResult{}, h.Err.err()
	}
	var res LoadResult
	if err := json.Unmarshal(h.Metadata, &res.Metadata); err != nil {
		return LoadResult{}, &runtime.Error{Plugin: m.Name, Digest: m.Digest, Export: abi.ExportMetadata, Reason: runtime.ReasonInvalidOutput, Detail: "metadata from the plugin host: " + err.Error()}
	}
	for _, e := range h.Exports {
		switch e {
		case abi.ExportValidate:
			res.Validates = true
		case abi.ExportEncode:
			res.Encodes = true
		}
	}
	return res, nil
}

// loadFrom has the host load m from its file if it has one, else from the bytes sent with the request.
func (p *proc) loadFrom(ctx context.Context, m Module) (*header, error) {
	if m.File != nil {
		h, _, err := p.roundTrip(ctx, &header{Op: opLoad, Digest: m.Digest, Name: m.Name, File: m.File}, nil, p.s.cfg.LoadTimeout)
		if err != nil || h.Err == nil || h.Err.Reason != reasonFileUnusable {
			return h, err
		}
		p.s.log.Info("plugin host could not load the module from its file; sending it", "plugin", m.Name, "file", m.File.Path, "reason", h.Err.Detail)
	}
	wasm, release, err := m.Bytes()
	if err != nil {
		return nil, err
	}
	defer release()
	h, _, err := p.roundTrip(ctx, &header{Op: opLoad, Digest: m.Digest, Name: m.Name}, wasm, p.s.cfg.LoadTimeout)
	return h, err
}

// call runs export of m on this host, loading m first if the host does not have it.
func (p *proc) call(ctx context.Context, m Module, export string, in []byte) ([]byte, error) {
	for range 2 {
		ls, err := p.use(ctx, m)
		if err != nil {
			return nil, err
		}
		h, out, err := p.roundTrip(ctx, &header{Op: opCall, Digest: m.Digest, Export: export}, in, p.s.cfg.Host.Timeout+p.s.cfg.Grace)
		p.done(ls)
		if err != nil {
			return nil, err
		}
		if h.Err == nil {
			if called := p.s.cfg.Hooks.Called; called != nil {
				called(runtime.CallEvent{Plugin: h.Plugin, Digest: m.Digest, Export: export, Duration: time.Duration(h.Seconds * float64(time.Second))})
			}
			return out, nil
		}
		if h.Err.Reason != reasonNotLoaded {
			return nil, h.Err.err()
		}
		p.mu.Lock()
		if p.loaded[m.Digest] == ls {
			delete(p.loaded, m.Digest)
			p.signalFreedLocked()
		}
		p.mu.Unlock()
	}
	return nil, &runtime.Error{Plugin: m.Name, Digest: m.Digest, Export: export, Reason: runtime.ReasonClosed, Detail: "the plugin host unloaded the module again right after loading it"}
}

// unload tells the host to drop the module with the digest, unless an operation uses it or, with
// idleFor > 0, one ended less than idleFor ago; the host answers, but nobody waits for it. It reports
// whether the module was dropped.
func (p *proc) unload(digest string, idleFor time.Duration) bool {
	p.mu.Lock()
	ls, ok := p.loaded[digest]
	if !ok || ls.calls > 0 || p.death != nil || (idleFor > 0 && time.Since(ls.used) < idleFor) {
		p.mu.Unlock()
		return false
	}
	if ls.idle != nil {
		ls.idle.Stop()
	}
	delete(p.loaded, digest)
	p.signalFreedLocked()
	p.mu.Unlock()
	_ = p.out.write(&header{Op: opUnload, Digest: digest}, nil)
	return true
}

// readStderr keeps the end of what the host itself wrote (a Go runtime's fatal error, never guest output,
// which the runtime captures per call) and logs it at debug level.
func (p *proc) readStderr(r io.Reader) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 4096), 64<<10)
	for sc.Scan() {
		line := sc.Text()
		p.stderr.add(line)
		p.s.log.V(1).Info("plugin host stderr", "role", p.role, "pid", p.cmd.Process.Pid, "line", truncate(line, 512))
	}
}

// tail keeps the last lines written, up to max bytes.
type tail struct {
	mu    sync.Mutex
	max   int
	lines []string
	size  int
}

func (t *tail) add(line string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	line = truncate(line, 512)
	t.lines = append(t.lines, line)
	t.size += len(line)
	for t.size > t.max && len(t.lines) > 1 {
		t.size -= len(t.lines[0])
		t.lines = t.lines[1:]
	}
}

// last returns the last line written.
func (t *tail) last() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.lines) == 0 {
		return ""
	}
	return t.lines[len(t.lines)-1]
}

// fatal returns the Go runtime's "fatal error: …" or "panic: …" line, if the host wrote one.
func (t *tail) fatal() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, l := range t.lines {
		if strings.HasPrefix(l, "fatal error:") || strings.HasPrefix(l, "panic:") || strings.HasPrefix(l, "runtime:") {
			return l
		}
	}
	return ""
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// residentBytes reads a process's resident set size from /proc; 0 when it cannot.
func residentBytes(pid int) uint64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/statm")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return 0
	}
	pages, err := strconv.ParseUint(f[1], 10, 64)
	if err != nil {
		return 0
	}
	return pages * uint64(os.Getpagesize())
}
