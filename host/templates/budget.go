package templates

import (
	"bytes"
	"context"
	"fmt"
	"reflect"
	"text/template"
	"text/template/parse"
)

// budget is what the templates of one stage may still consume. It is used by one goroutine: a stage's
// templates execute one after the other.
type budget struct {
	lim    Limits
	ctx    context.Context
	done   <-chan struct{}
	cancel context.CancelFunc

	steps    int
	depth    int
	work     int64
	stageOut int
	out      *limitWriter // the output of the template executing now

	funcs        template.FuncMap
	instrumented map[*parse.Tree]bool
}

func newBudget(ctx context.Context, lim Limits) *budget {
	b := &budget{lim: lim, instrumented: map[*parse.Tree]bool{}}
	b.ctx, b.cancel = context.WithTimeoutCause(ctx, lim.Timeout, &LimitError{Limit: "Timeout",
		Max: lim.Timeout.Milliseconds(), Detail: "the stage's templates ran too long"})
	b.done = b.ctx.Done()
	return b
}

// newSet starts a template set whose functions are charged to b. The functions are bound on first use: a
// stage without templates (a plugin profile's) costs no binding.
func (b *budget) newSet(name string) *template.Template {
	if b.funcs == nil {
		b.funcs = b.bind()
	}
	return template.New(name).Funcs(b.funcs)
}

// close releases the budget's timer.
func (b *budget) close() { b.cancel() }

// step counts a range iteration, template invocation or function call, and stops the execution when the
// steps are used up or the context ends (the caller cancelled, or the Timeout passed).
func (b *budget) step() error {
	b.steps++
	if b.steps > b.lim.Steps {
		return &LimitError{Limit: "Steps", Max: int64(b.lim.Steps),
			Detail: "too many range iterations, template and function calls"}
	}
	select {
	case <-b.done:
		return fmt.Errorf("template execution stopped: %w", context.Cause(b.ctx))
	default:
		return nil
	}
}

func (b *budget) charge(n int64) error {
	b.work += n
	if b.work > b.lim.WorkBytes {
		return &LimitError{Limit: "WorkBytes", Max: b.lim.WorkBytes,
			Detail: "functions took, built and printed too many bytes"}
	}
	return nil
}

// The hidden functions instrument.go calls from every template. They print nothing.
const (
	stepFunc  = "osmRangeStep"
	enterFunc = "osmTemplateEnter"
	leaveFunc = "osmTemplateLeave"
	printFunc = "osmPrintCheck"
)

var hidden = []string{stepFunc, enterFunc, leaveFunc, printFunc}

func (b *budget) loopStep() (string, error) { return "", b.step() }

func (b *budget) enter() (string, error) {
	b.depth++
	if b.depth > b.lim.CallDepth {
		return "", &LimitError{Limit: "CallDepth", Max: int64(b.lim.CallDepth), Detail: "templates invoke templates too deeply"}
	}
	return "", b.step()
}

func (b *budget) leave() string {
	b.depth--
	return ""
}

// printGuard checks a value about to be printed. fmt formats a value in full before the writer sees any of
// it, so a list holding the same large map many times (set mutates maps in place, after they were checked)
// would be formatted in memory before the output limit could refuse it.
func (b *budget) printGuard(v any) (any, error) {
	room := min(b.lim.OutputBytes-b.out.buf.Len(), b.lim.StageOutputBytes-b.stageOut)
	m := sizeOf(reflect.ValueOf(v), min(room, b.lim.ValueBytes))
	if m.bytes > room {
		return nil, b.out.limitError(m.bytes)
	}
	if m.bytes > b.lim.ValueBytes {
		return nil, b.valueError(fmt.Sprintf("a printed value of more than %d bytes", m.bytes))
	}
	return v, b.charge(int64(m.bytes))
}

// limitWriter holds a template's output, and fails the execution when the template or the stage produces
// more than its limit.
type limitWriter struct {
	b   *budget
	buf bytes.Buffer
}

func (w *limitWriter) Write(p []byte) (int, error) {
	if w.buf.Len()+len(p) > w.b.lim.OutputBytes || w.b.stageOut+len(p) > w.b.lim.StageOutputBytes {
		return 0, w.limitError(len(p))
	}
	w.b.stageOut += len(p)
	return w.buf.Write(p)
}

func (w *limitWriter) limitError(more int) error {
	if w.buf.Len()+more > w.b.lim.OutputBytes {
		return &LimitError{Limit: "OutputBytes", Max: int64(w.b.lim.OutputBytes),
			Detail: fmt.Sprintf("the template's output would reach %d bytes", w.buf.Len()+more)}
	}
	return &LimitError{Limit: "StageOutputBytes", Max: int64(w.b.lim.StageOutputBytes),
		Detail: fmt.Sprintf("the stage's output would reach %d bytes", w.b.stageOut+more)}
}

// execute runs t on data within the budget.
func (b *budget) execute(t *template.Template, data any) (string, error) {
	if err := context.Cause(b.ctx); err != nil {
		return "", fmt.Errorf("template execution stopped: %w", err)
	}
	b.out = &limitWriter{b: b}
	b.depth = 0
	if err := t.Execute(b.out, data); err != nil {
		return "", trimExecError(err)
	}
	return b.out.buf.String(), nil
}
