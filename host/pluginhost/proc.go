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

// proc is one plugin host process and the calls in flight on it. It never outlives a failure: a host that
// dies, or is killed, is replaced by a new proc on the next call.
type proc struct {
	s    *Supervisor
	role string
	cmd  *exec.Cmd
	in   io.WriteCloser
	out  *frameWriter
	// users counts the operations the supervisor runs on this host (guarded by the Supervisor's mu).
	users int

	mu      sync.Mutex
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
}

// pending is an operation waiting for its reply.
type pending struct {
	id       uint64
	digest   string
	what     string // "osm_render", "load", ...
	deadline time.Time
	reply    chan reply
	// A call's thread in the host, its CPU time when the call started there, and when the supervisor heard
	// of it (the "running" event); thread is 0 until then.
	thread    int
	cpu       int64
	runningAt time.Time
	// loadDeadline, while a load runs the module's initialisation, is the deadline it returns to after.
	loadDeadline time.Time
}

type reply struct {
	h       *header
	payload []byte
}

type loadState struct {
	done chan struct{}
	res  LoadResult
	err  error
}

// death says why a host ended, and whom to blame.
type death struct {
	cause string
	// reason is the runtime.Reason a culprit's caller gets.
	reason runtime.Reason
	// unstarted says the host died before it started: the host's own failure.
	unstarted bool
	// culprits are the operations the host was killed for, or the only one in flight when it died. Empty
	// means nobody in particular: a crash or the memory watchdog with several operations in flight.
	culprits map[uint64]bool
	// suspects, when the host was killed for time, are the operations past their deadlines that are not
	// known to be culprits: they run again alone on probation, and the others in flight on a fresh host.
	suspects map[uint64]bool
}

// startProc starts a host process from the supervisor's executable.
func (s *Supervisor) startProc(role string) (*proc, error) {
	cfgJSON, err := json.Marshal(s.cfg.Host)
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
	p := &proc{s: s, role: role, cmd: cmd, in: stdin, out: &frameWriter{w: stdin},
		pending: map[uint64]*pending{}, loaded: map[string]*loadState{}, dead: make(chan struct{}), stderr: &tail{max: 4 << 10},
		loading: make(chan struct{}, 2)}
	s.metrics.started(role)
	s.log.V(1).Info("plugin host started", "role", role, "pid", cmd.Process.Pid)
	go p.readStderr(stderr)
	go p.read(stdout)
	go p.watch()
	return p, nil
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
			break
		}
		switch h.Op {
		case opReady:
			p.mu.Lock()
			p.ready = true
			p.mu.Unlock()
		case opEvent:
			if h.Event != nil && h.Event.Kind == "running" {
				p.running(h.ID, h.Event)
			} else if h.Event != nil {
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
	close(p.dead)
	p.s.metrics.died(p.role, string(d.reason))
	p.s.log.Info("plugin host ended", "role", p.role, "pid", p.cmd.Process.Pid, "cause", d.cause)
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

// progress adjusts the deadlines of a module's loads as they go: a load runs the module's own code twice
// (its initialisation, to snapshot it, and the osm_metadata call once compiled), and each gets a call's
// deadline instead of the load's, so that a module spinning in its _initialize cannot hold the host for
// the whole load timeout. Between them the load returns to its own deadline, never past it.
func (p *proc) progress(e *wireEvent) {
	if e.Err != nil {
		return
	}
	now := time.Now()
	call := now.Add(p.s.cfg.Host.Timeout + p.s.cfg.Grace)
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, pd := range p.pending {
		if pd.what != opLoad || pd.digest != e.Digest {
			continue
		}
		switch e.Kind {
		case "initializing":
			pd.loadDeadline = pd.deadline
			pd.deadline = earliest(pd.deadline, call)
		case "initialized":
			if !pd.loadDeadline.IsZero() {
				pd.deadline, pd.loadDeadline = pd.loadDeadline, time.Time{}
			}
		case "compiled":
			pd.deadline = earliest(pd.deadline, call)
		}
	}
}

func earliest(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// running records where a call started in the host.
func (p *proc) running(id uint64, e *wireEvent) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if pd := p.pending[id]; pd != nil {
		pd.thread, pd.cpu, pd.runningAt = e.Thread, e.CPU, time.Now()
	}
}

// watch enforces deadlines and the memory bound from outside the host: nothing the guest does inside can
// stop a SIGKILL.
func (p *proc) watch() {
	t := time.NewTicker(p.s.cfg.WatchInterval)
	defer t.Stop()
	for {
		select {
		case <-p.dead:
			return
		case now := <-t.C:
			p.mu.Lock()
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

// overdue returns the death of a host with an operation past its deadline, or nil, and whom it blames.
// Lateness alone does not prove guilt: guest machine code cannot be preempted, so calls that spin on every
// thread of the host starve the others, which then overrun too. Every operation within a grace of its
// deadline is suspect, and the operating system's accounting sorts them (spent):
//
//   - a call whose thread ran for at least a quarter of the time since it started spun: it is a culprit;
//   - a call that never started was starved: it runs again on a fresh host, as do, when there are culprits,
//     the others that are not late yet; the late ones go to probation;
//   - otherwise (no call spun: loads, whose CPU is not followed, and calls that waited) the late ones are
//     culprits when the suspects are all one module's, and when they span several nobody is blamed yet: each
//     runs again alone on probation, where overrunning is its own doing.
//
// Called with p.mu held.
func (p *proc) overdue(now time.Time) *death {
	hot, ran, lateRan, modules := map[uint64]bool{}, map[uint64]bool{}, map[uint64]bool{}, map[string]bool{}
	var what []string
	for id, pd := range p.pending {
		late := now.After(pd.deadline)
		if late {
			what = append(what, pd.what)
		}
		if !now.After(pd.deadline.Add(-p.s.cfg.Grace)) {
			continue
		}
		switch started, spun := p.spent(pd, now); {
		case spun:
			hot[id] = true
		case started:
			ran[id], modules[pd.digest] = true, true
			if late {
				lateRan[id] = true
			}
		}
	}
	if len(what) == 0 {
		return nil
	}
	slices.Sort(what)
	d := &death{cause: "ran past its deadline (" + strings.Join(what, ", ") + "); the plugin host was killed", reason: runtime.ReasonTimeout}
	switch {
	case len(hot) > 0:
		// The late ones that did not spin (loads among them) may have been starved, or may be hostile on
		// their own: alone on probation they show which, instead of overrunning again on the next host.
		d.culprits, d.suspects = hot, lateRan
	case len(modules) == 1:
		d.culprits = lateRan
	default:
		d.culprits, d.suspects = map[uint64]bool{}, ran
	}
	return d
}

// spent tells whether operation pd started in the host and whether it spun there: its thread's CPU time
// since it started is at least a quarter of the time since. A load's CPU is not followed (it compiles on
// threads of the runtime's choosing): it counts as started.
func (p *proc) spent(pd *pending, now time.Time) (started, spun bool) {
	if pd.what == opLoad {
		return true, false
	}
	if pd.thread == 0 {
		return false, false
	}
	cpu := threadCPU(p.cmd.Process.Pid, pd.thread)
	if cpu < 0 || pd.cpu < 0 {
		return true, false
	}
	return true, 4*time.Duration(cpu-pd.cpu) >= now.Sub(pd.runningAt)
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
	suspect bool
}

func (e *hostDied) Error() string { return e.death.cause }

// roundTrip sends one operation and waits for its reply, the host's death, or ctx. An operation abandoned
// by its caller stays tracked until it answers, so its deadline still holds the host to account.
func (p *proc) roundTrip(ctx context.Context, h *header, payload []byte, timeout time.Duration) (*header, []byte, error) {
	pd := &pending{digest: h.Digest, what: h.Op, deadline: time.Now().Add(timeout), reply: make(chan reply, 1)}
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
	return &hostDied{death: d, culprit: d.culprits[id], suspect: d.suspects[id]}
}

// ensureLoaded loads m into this host once; concurrent callers wait for the first.
func (p *proc) ensureLoaded(ctx context.Context, m Module) (LoadResult, error) {
	p.mu.Lock()
	ls, ok := p.loaded[m.Digest]
	if !ok {
		ls = &loadState{done: make(chan struct{})}
		p.loaded[m.Digest] = ls
	}
	p.mu.Unlock()
	if ok {
		select {
		case <-ls.done:
			return ls.res, ls.err
		case <-ctx.Done():
			return LoadResult{}, &runtime.Error{Plugin: m.Name, Digest: m.Digest, Reason: runtime.ReasonCanceled, Detail: "waiting for the module to load: " + ctx.Err().Error(), Err: ctx.Err()}
		}
	}
	ls.res, ls.err = p.load(ctx, m)
	if ls.err != nil {
		p.mu.Lock()
		delete(p.loaded, m.Digest)
		p.mu.Unlock()
	}
	close(ls.done)
	return ls.res, ls.err
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
		if _, err := p.ensureLoaded(ctx, m); err != nil {
			return nil, err
		}
		h, out, err := p.roundTrip(ctx, &header{Op: opCall, Digest: m.Digest, Export: export}, in, p.s.cfg.Host.Timeout+p.s.cfg.Grace)
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
		delete(p.loaded, m.Digest)
		p.mu.Unlock()
	}
	return nil, &runtime.Error{Plugin: m.Name, Digest: m.Digest, Export: export, Reason: runtime.ReasonClosed, Detail: "the plugin host unloaded the module again right after loading it"}
}

// unload tells the host to drop m; the host answers, but nobody waits for it.
func (p *proc) unload(digest string) {
	p.mu.Lock()
	_, ok := p.loaded[digest]
	delete(p.loaded, digest)
	dead := p.death != nil
	p.mu.Unlock()
	if ok && !dead {
		_ = p.out.write(&header{Op: opUnload, Digest: digest}, nil)
	}
}

// readStderr keeps the end of what the host itself wrote (a Go runtime's fatal error, never guest output,
// which the runtime captures per call) and logs it at debug level.
func (p *proc) readStderr(r io.Reader) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 4096), 64<<10)
	for sc.Scan() {
		line := sc.Text()
		p.stderr.add(line)
		p.s.log.V(1).Info("plugin host stderr", "role", p.role, "line", truncate(line, 512))
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
