package runtime

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	extism "github.com/extism/go-sdk"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/experimental"
	"github.com/tetratelabs/wazero/sys"
)

// instance is one instantiation of a module with its own memory and captured output. It is owned by one
// goroutine at a time: wazero instances are not safe for concurrent calls.
type instance struct {
	plugin *extism.Plugin // the standard path, or
	fast   *fastInstance  // the fast path (SPEC.md §8)
	memory *memoryMeter
	stdout *capture
	stderr *capture
	// broken is set when the instance must not serve another call although its call did not fail.
	broken bool
}

func (m *Module) newInstance(ctx context.Context) (*instance, error) {
	inst := &instance{memory: &memoryMeter{}, stdout: newCapture(m.rt.cfg.MaxOutputBytes), stderr: newCapture(m.rt.cfg.MaxOutputBytes)}
	if m.compiled.fast != nil {
		fi, err := m.compiled.fast.instantiate(ctx, inst)
		if err != nil {
			return nil, err
		}
		inst.fast = fi
		return inst, nil
	}
	// A fresh ModuleConfig keeps wazero's sandbox defaults: no arguments, no environment, no preopened
	// directories, a fake wall clock and monotonic clock, and a deterministic random source. Extism sets none
	// of them (except stdout/stderr when EXTISM_ENABLE_WASI_OUTPUT is set in the controller's environment).
	mc := wazero.NewModuleConfig().WithStdout(inst.stdout).WithStderr(inst.stderr)
	p, err := m.compiled.extism.Instance(experimental.WithMemoryAllocator(ctx, inst.memory), extism.PluginInstanceConfig{ModuleConfig: mc})
	if err != nil {
		return nil, err
	}
	// Belt and braces: the manifest grants neither, but these fields are public and checked per request.
	p.AllowedHosts = nil
	p.AllowedPaths = nil
	p.SetLogger(func(level extism.LogLevel, msg string) {
		// Extism's log host functions (pdk.Log) end up here when extism.SetLogLevel enabled them.
		_, _ = inst.stderr.Write([]byte(level.String() + ": " + msg + "\n"))
	})
	inst.plugin = p
	return inst, nil
}

func (i *instance) close() {
	if i.fast != nil {
		i.fast.close()
		return
	}
	_ = i.plugin.Close(context.Background())
}

// result is what one call produced, before the module interprets the output.
type result struct {
	out  []byte
	fail *Error // nil on success
}

// call runs export under the module's timeout. It never panics: Extism turns some host-side failures into
// panics, and a panic here would take down the controller.
func (i *instance) call(ctx context.Context, m *Module, export string, in []byte) (res result) {
	callCtx, cancel := context.WithTimeout(ctx, m.rt.cfg.Timeout)
	defer cancel()
	defer func() {
		if r := recover(); r != nil {
			res = result{fail: m.fail(export, ReasonTrap, fmt.Sprintf("host error while calling the guest: %v", r), nil)}
		}
	}()
	if i.fast != nil {
		return i.callFast(ctx, callCtx, m, export, in)
	}
	_, out, err := i.plugin.CallWithContext(callCtx, export, in)
	if err == nil {
		return result{out: out}
	}
	return result{fail: i.classify(ctx, callCtx, m, export, err)}
}

// callFast is call on the fast path. Its failures are classified like the standard path's, so that a plugin
// fails the same way on both.
func (i *instance) callFast(ctx, callCtx context.Context, m *Module, export string, in []byte) result {
	out, failed, err := i.fast.invoke(callCtx, export, in)
	switch {
	case err == nil && failed:
		return result{fail: m.fail(export, ReasonPluginError, string(out), nil)}
	case err == nil:
		return result{out: out}
	case exitedCleanly(err) && ctx.Err() == nil && callCtx.Err() == nil:
		// Extism reports a guest that exited with status 0 as a call without output; the instance is gone.
		i.broken = true
		return result{out: []byte{}}
	}
	var garbage *errFastOutput
	if errors.As(err, &garbage) && ctx.Err() == nil && callCtx.Err() == nil {
		return result{fail: m.failStderr(export, ReasonInvalidOutput, "broke the fast-path calling convention: "+garbage.msg,
			i.stderr.String()+i.stdout.String(), err)}
	}
	return result{fail: i.classify(ctx, callCtx, m, export, err)}
}

// classify turns a failed call into an *Error with the right Reason.
func (i *instance) classify(ctx, callCtx context.Context, m *Module, export string, err error) *Error {
	stderr := i.stderr.String() + i.stdout.String()
	var exit *sys.ExitError
	isExit := errors.As(err, &exit)
	switch {
	case ctx.Err() != nil:
		return m.failStderr(export, ReasonCanceled, "canceled: "+ctx.Err().Error(), stderr, ctx.Err())
	case callCtx.Err() != nil || (isExit && exit.ExitCode() == sys.ExitCodeDeadlineExceeded):
		return m.failStderr(export, ReasonTimeout, "timed out after "+fmtDuration(m.rt.cfg.Timeout), stderr, context.DeadlineExceeded)
	}
	// A guest that set the Extism error returned normally: its message is the error, and the instance is
	// fine. A trap leaves the error channel empty (Extism resets it before each call).
	if msg := i.pluginError(); !isExit && msg != "" && msg == err.Error() {
		return m.fail(export, ReasonPluginError, msg, nil)
	}
	first := firstLine(err.Error())
	switch {
	case outOfMemory(stderr, err):
		return m.failStderr(export, ReasonOutOfMemory, fmt.Sprintf("out of memory (limit %d MiB): %s", m.rt.cfg.MemoryLimit>>20, first), stderr, err)
	case strings.Contains(stderr, "panic: ") || strings.Contains(stderr, "fatal error: "):
		return m.failStderr(export, ReasonPanic, "guest runtime crashed: "+first, stderr, err)
	default:
		return m.failStderr(export, ReasonTrap, "trapped: "+first, stderr, err)
	}
}

// pluginError is the Extism error the guest set. On the fast path guest errors are results, never errors.
func (i *instance) pluginError() string {
	if i.plugin == nil {
		return ""
	}
	return i.plugin.GetError()
}

// outOfMemory recognises the Go runtime's and wazero's wording for a failed memory.grow.
func outOfMemory(stderr string, err error) bool {
	for _, s := range []string{stderr, err.Error()} {
		if strings.Contains(s, "out of memory") || strings.Contains(s, "memory limit") {
			return true
		}
	}
	return false
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return strings.TrimSpace(s[:i])
	}
	return strings.TrimSpace(s)
}

// capture is a bounded io.Writer for guest output, reset before each call.
type capture struct {
	mu      sync.Mutex
	max     int
	buf     []byte
	dropped int
}

func newCapture(max int) *capture { return &capture{max: max} }

func (c *capture) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	room := c.max - len(c.buf)
	if room >= len(p) {
		c.buf = append(c.buf, p...)
	} else {
		if room > 0 {
			c.buf = append(c.buf, p[:room]...)
		}
		c.dropped += len(p) - max(room, 0)
	}
	return len(p), nil
}

func (c *capture) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return string(c.buf)
}

// take returns the captured text and whether some was dropped, and empties the buffer.
func (c *capture) take() (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s, truncated := string(c.buf), c.dropped > 0
	c.buf, c.dropped = c.buf[:0], 0
	return s, truncated
}
