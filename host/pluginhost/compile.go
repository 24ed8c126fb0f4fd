package pluginhost

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/osmhq/osm/sdk/runtime"
)

// roleCompile is the role of a process that compiles one tenant's module into its cache and runs none of
// its code.
const roleCompile = "compile"

// ReasonCacheTampered: a host found its module's compiled code changed since it was compiled (or since the
// build precompiled it). The supervisor compiles it again; the operation fails only past maxRetries.
const ReasonCacheTampered runtime.Reason = "CacheTampered"

// exitTampered is a tenant's host's exit status when verifyArtifacts failed, before it read any module;
// tamperedPrefix starts its last line.
const (
	exitTampered   = 3
	tamperedPrefix = "plugin host: compiled code changed: "
)

// maxCompileReply bounds what a compile process writes on its standard output (its error).
const maxCompileReply = 64 << 10

// compileMain is a compile process: it confines itself (Landlock: it writes its cache directory only), reads
// the module from r, checks and compiles it (runtime.Compile, which instantiates nothing) and writes its
// error, if any, to w as JSON.
func compileMain(cfg HostConfig, r io.Reader, w io.Writer) int {
	if err := confine(cfg); err != nil {
		fmt.Fprintln(os.Stderr, "plugin compiler:", err)
		return 2
	}
	rcfg := cfg.runtimeConfig(runtime.Hooks{})
	rt, err := runtime.New(rcfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "plugin compiler:", err)
		return 2
	}
	wasm, err := io.ReadAll(io.LimitReader(r, int64(rt.Config().MaxModuleBytes)+1))
	if err != nil {
		fmt.Fprintln(os.Stderr, "plugin compiler: reading the module:", err)
		return 2
	}
	if d := runtime.Digest(wasm); d != cfg.Digest {
		err = &runtime.Error{Plugin: cfg.Name, Digest: cfg.Digest, Reason: runtime.ReasonInvalidModule, Detail: fmt.Sprintf("module bytes have digest %s, not %s", d, cfg.Digest)}
	} else {
		err = rt.Compile(context.Background(), cfg.Name, wasm)
	}
	if err != nil {
		_ = json.NewEncoder(w).Encode(toWire(err))
		return 1
	}
	return 0
}

// compileState is a compile in flight, which concurrent operations on the module wait for.
type compileState struct {
	done chan struct{}
	err  error
}

// tenantDir is the cache directory of the tenant's module with the digest.
func (s *Supervisor) tenantDir(digest string) string {
	return filepath.Join(s.cfg.Host.CacheDir, "tenants", strings.TrimPrefix(digest, "sha256:"))
}

// prepare makes sure a tenant's module that has no live host is compiled, by a compile process, into its
// cache directory, and that the directory still holds what that process wrote (the digests recorded then):
// if not, it is compiled again, so a host never starts over code that changed.
func (s *Supervisor) prepare(ctx context.Context, m Module) error {
	if m.Builtin {
		return nil
	}
	s.mu.Lock()
	h := s.hosts[m.Digest]
	live := h != nil && !isDead(h.p)
	arts, ok := s.compiled[m.Digest]
	s.mu.Unlock()
	if live {
		return nil
	}
	if !ok {
		// Compiled by an earlier process of the controller (or another sharing the cache): its record, once the
		// directory still holds exactly what was recorded, spares a compile at every restart.
		if arts, err := s.recorded(m.Digest); err == nil {
			s.mu.Lock()
			s.compiled[m.Digest] = arts
			s.mu.Unlock()
			return nil
		}
	}
	if ok {
		err := verifyArtifacts(s.tenantDir(m.Digest), arts, nil)
		if err == nil {
			return nil
		}
		s.log.Info("a tenant's compiled module changed since it was compiled; compiling it again", "plugin", m.Name, "digest", m.Digest, "cause", err.Error())
		s.forgetCompiled(m.Digest)
	}
	return s.compileOnce(ctx, m)
}

func (s *Supervisor) forgetCompiled(digest string) {
	s.mu.Lock()
	delete(s.compiled, digest)
	s.mu.Unlock()
}

// compileOnce runs one compile process for m; concurrent callers wait for it. A module that failed to
// compile (invalid) is remembered (rememberFailure): it fails again at once until Unload.
func (s *Supervisor) compileOnce(ctx context.Context, m Module) error {
	s.mu.Lock()
	if _, ok := s.compiled[m.Digest]; ok {
		s.mu.Unlock()
		return nil
	}
	c := s.compiles[m.Digest]
	if c == nil {
		c = &compileState{done: make(chan struct{})}
		s.compiles[m.Digest] = c
		go s.compile(m, c)
	}
	s.mu.Unlock()
	select {
	case <-c.done:
		return c.err
	case <-ctx.Done():
		return &runtime.Error{Plugin: m.Name, Digest: m.Digest, Reason: runtime.ReasonCanceled, Detail: "waiting for the module to compile: " + ctx.Err().Error(), Err: ctx.Err()}
	}
}

// compile runs the compile process for m within the namespace's and the tenants' bounds and records its
// artifacts, or its failure. It runs on its own: a caller that gives up leaves it to whoever asks next.
func (s *Supervisor) compile(m Module, c *compileState) {
	defer close(c.done)
	release := s.compileSlot(m.Namespace)
	arts, err := s.runCompile(m)
	release()
	if err != nil {
		s.rememberFailure(m, err, true)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.compiles, m.Digest)
	c.err = err
	if err == nil {
		s.compiled[m.Digest] = arts
		if err := s.record(m.Digest, arts); err != nil {
			s.log.Info("could not record a tenant's compiled module; the next controller compiles it again", "plugin", m.Name, "digest", m.Digest, "cause", err.Error())
		}
	}
}

// compileSlot waits for room for one more compile process of the namespace's modules
// (MaxHostsPerNamespace) and of all tenants (MaxHosts), and returns what gives it back.
func (s *Supervisor) compileSlot(ns string) func() {
	if ns == "" {
		s.compileSlots <- struct{}{}
		return func() { <-s.compileSlots }
	}
	s.mu.Lock()
	sem := s.nsCompiles[ns]
	if sem == nil {
		sem = make(chan struct{}, s.cfg.MaxHostsPerNamespace)
		s.nsCompiles[ns] = sem
	}
	s.mu.Unlock()
	sem <- struct{}{}
	s.compileSlots <- struct{}{}
	return func() { <-s.compileSlots; <-sem }
}

// runCompile compiles m into a fresh cache directory of its own with a compile process, bounded as a host
// is (the load's CPU time, its wall-clock cap, MaxRSS, RLIMIT_AS, a tenant's priority) and killed past a
// bound, and returns the digests of the files it wrote. A death of the compile process is a strike against
// the module, as a host's is.
func (s *Supervisor) runCompile(m Module) (Artifacts, error) {
	fail := func(reason runtime.Reason, detail string) error {
		return &runtime.Error{Plugin: m.Name, Digest: m.Digest, Export: "compile", Reason: reason, Detail: detail}
	}
	dir := s.tenantDir(m.Digest)
	if err := os.RemoveAll(dir); err != nil {
		return nil, fail(ReasonHostCrashed, "clearing the module's compilation cache: "+err.Error())
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fail(ReasonHostCrashed, "creating the module's compilation cache: "+err.Error())
	}
	wasm, releaseBytes, err := m.Bytes()
	if err != nil {
		return nil, err
	}
	defer releaseBytes()
	hc := s.cfg.Host
	hc.CacheDir, hc.Role, hc.Name, hc.Digest = dir, roleCompile, m.Name, m.Digest
	hc.NoSnapshot, hc.ReadOnlyCache, hc.Artifacts, hc.Landlock = true, false, nil, !s.cfg.NoLandlock
	cfgJSON, err := json.Marshal(hc)
	if err != nil {
		return nil, err
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(s.cfg.Executable)
	cmd.Args = []string{"osm-plugin-host"}
	cmd.Env = hostEnv(string(cfgJSON))
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	cmd.Stdin = bytes.NewReader(wasm)
	cmd.Stdout = &limitedWriter{w: &stdout, n: maxCompileReply}
	cmd.Stderr = &limitedWriter{w: &stderr, n: maxCompileReply}
	began := time.Now()
	if err := cmd.Start(); err != nil {
		return nil, fail(ReasonHostCrashed, fmt.Sprintf("starting the plugin compiler %s: %v", s.cfg.Executable, err))
	}
	if s.cfg.TenantNice > 0 {
		_ = syscall.Setpriority(syscall.PRIO_PROCESS, cmd.Process.Pid, s.cfg.TenantNice)
	}
	s.metrics.started(roleCompile)
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	killed, waitErr := s.watchCompile(cmd, began, waited)
	cpu := cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	s.metrics.compileCPU.Add(cpu.Seconds())
	s.log.V(1).Info("plugin compile process ended", "plugin", m.Name, "digest", m.Digest, "cpu", cpu.String(), "wall", time.Since(began).String(), "status", exitText(waitErr))
	if killed != nil {
		s.metrics.died(roleCompile, string(killed.reason))
		s.strike(m.Digest, m.Name, killed)
		return nil, fail(killed.reason, killed.cause)
	}
	if waitErr != nil {
		var we wireError
		if json.Unmarshal(stdout.Bytes(), &we) == nil && we.Reason != "" {
			s.metrics.died(roleCompile, string(we.Reason))
			return nil, we.err()
		}
		d := &death{cause: "the plugin compiler died (" + exitText(waitErr) + "): " + truncate(lastLine(stderr.String()), 512), reason: ReasonHostCrashed}
		s.metrics.died(roleCompile, string(d.reason))
		s.strike(m.Digest, m.Name, d)
		return nil, fail(d.reason, d.cause)
	}
	s.metrics.died(roleCompile, string(runtime.ReasonClosed))
	arts, err := hashArtifacts(dir)
	if err != nil {
		return nil, fail(ReasonHostCrashed, "recording the compiled module: "+err.Error())
	}
	return arts, nil
}

// watchCompile kills the compile process past its CPU budget (the load timeout), its wall-clock cap or
// MaxRSS, and returns, if it was killed, why, and how it ended.
func (s *Supervisor) watchCompile(cmd *exec.Cmd, began time.Time, waited <-chan error) (*death, error) {
	t := time.NewTicker(s.cfg.WatchInterval)
	defer t.Stop()
	pid := cmd.Process.Pid
	for {
		select {
		case err := <-waited:
			return nil, err
		case <-t.C:
		}
		var d *death
		cpu := processCPU(pid)
		switch rss := residentBytes(pid); {
		case cpu > s.cfg.LoadTimeout:
			d = &death{cause: fmt.Sprintf("compiling took %s of CPU, past its limit of %s; the plugin compiler was killed", cpu.Round(time.Millisecond), s.cfg.LoadTimeout), reason: runtime.ReasonTimeout}
		case time.Since(began) > s.wallCap(s.cfg.LoadTimeout):
			d = &death{cause: fmt.Sprintf("compiling took %s, past its wall-clock cap of %s; the plugin compiler was killed", time.Since(began).Round(time.Millisecond), s.wallCap(s.cfg.LoadTimeout)), reason: runtime.ReasonTimeout}
		case s.cfg.MaxRSS > 0 && rss > s.cfg.MaxRSS:
			d = &death{cause: fmt.Sprintf("the plugin compiler grew to %d MiB, past its limit of %d MiB, and was killed", rss>>20, s.cfg.MaxRSS>>20), reason: runtime.ReasonOutOfMemory}
		}
		if d != nil {
			_ = cmd.Process.Kill()
			return d, <-waited
		}
	}
}

func lastLine(s string) string {
	s = strings.TrimRight(s, "\n")
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}

// limitedWriter keeps the first n bytes written and drops the rest, so a process cannot grow the
// supervisor's memory through its output.
type limitedWriter struct {
	w io.Writer
	n int
}

func (l *limitedWriter) Write(p []byte) (int, error) {
	if l.n > 0 {
		k := min(len(p), l.n)
		_, _ = l.w.Write(p[:k])
		l.n -= k
	}
	return len(p), nil
}
