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

// instance is one instantiation of a module with its own memory and captured output. It serves exactly one
// call and is closed after it.
type instance struct {
	plugin *extism.Plugin // nil when instantiation failed
	memory *memoryMeter
	stdout *capture
	stderr *capture
}

// newInstance instantiates the module under ctx, whose deadline bounds the module's start function. It returns
// the instance even on failure, for the output it captured.
func (m *Module) newInstance(ctx context.Context) (*instance, error) {
	cfg := &m.rt.cfg
	inst := &instance{memory: &memoryMeter{kernelMax: cfg.ioMemory(), image: m.image}, stdout: newCapture(cfg.MaxOutputBytes), stderr: newCapture(cfg.MaxOutputBytes)}
	// A fresh ModuleConfig keeps wazero's sandbox defaults: no arguments, no environment, no preopened
	// directories; the clocks and the random source are deterministic (guestEnv). Extism sets none of them
	// (except stdout/stderr when EXTISM_ENABLE_WASI_OUTPUT is set in the controller's environment).
	mc, _ := m.start.apply(wazero.NewModuleConfig().WithStdout(inst.stdout).WithStderr(inst.stderr))
	p, err := m.compiled.Instance(experimental.WithMemoryAllocator(ctx, inst.memory), extism.PluginInstanceConfig{ModuleConfig: mc})
	if err != nil {
		return inst, err
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
	if i.plugin != nil {
		_ = i.plugin.Close(context.Background())
	}
}

// result is what one call produced, before the module interprets the output.
type result struct {
	out  []byte
	fail *Error // nil on success
}

// call runs export under callCtx, the caller's ctx with the module's timeout. It never panics: Extism turns
// some host-side failures into panics, and a panic here would take down the controller.
func (i *instance) call(ctx, callCtx context.Context, m *Module, export string, in []byte) (res result) {
	defer func() {
		if r := recover(); r != nil {
			res = result{fail: m.fail(export, ReasonTrap, fmt.Sprintf("host error while calling the guest: %v", r), nil)}
		}
	}()
	_, out, err := i.plugin.CallWithContext(callCtx, export, in)
	switch {
	case i.memory.kernelFull() && ctx.Err() == nil && callCtx.Err() == nil:
		// The output did not fit the kernel's memory; whatever the guest made of the failed allocation, the
		// output is incomplete.
		return result{fail: i.tooLarge(m, export)}
	case err != nil:
		return result{fail: i.classify(ctx, callCtx, m, export, err)}
	case len(out) > m.rt.cfg.MaxResponseBytes:
		return result{fail: i.tooLarge(m, export)}
	}
	return result{out: out}
}

func (i *instance) tooLarge(m *Module, export string) *Error {
	return m.failStderr(export, ReasonInvalidOutput, fmt.Sprintf("output exceeds the limit of %d bytes (MaxResponseBytes)", m.rt.cfg.MaxResponseBytes),
		i.stderr.String()+i.stdout.String(), nil)
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
		return m.failStderr(export, ReasonOutOfMemory, fmt.Sprintf("out of memory (limit %s): %s", mib(m.rt.cfg.MemoryLimit), first), stderr, err)
	case strings.Contains(stderr, "panic: ") || strings.Contains(stderr, "fatal error: "):
		return m.failStderr(export, ReasonPanic, "guest runtime crashed: "+first, stderr, err)
	default:
		return m.failStderr(export, ReasonTrap, "trapped: "+first, stderr, err)
	}
}

// pluginError is the Extism error the guest set.
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
