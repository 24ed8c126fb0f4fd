package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/osmhq/osm/sdk/abi"
	"github.com/osmhq/osm/sdk/internal/wasmcheck"
)

// Module is a loaded plugin: compiled code and validated metadata. It is safe for concurrent use; each call
// runs on a fresh instance of its own, which is closed when the call returns (SPEC.md §6), so nothing a call
// leaves in an instance (globals, heap, a half-finished render) can reach another call.
type Module struct {
	rt       *Runtime
	name     string
	digest   string
	compiled *compiledPlugin
	meta     abi.Metadata
	exports  map[string]bool
	start    guestEnv     // where instances' clocks and random source start
	image    *memoryImage // the initial memory of a snapshotted module's instances, if not in its data segments

	mu       sync.RWMutex
	closed   bool
	inflight sync.WaitGroup
}

func newModule(rt *Runtime, name, digest string, compiled *compiledPlugin, info *wasmcheck.Module) *Module {
	m := &Module{rt: rt, name: name, digest: digest, compiled: compiled, exports: map[string]bool{}}
	for name, kind := range info.Exports {
		if kind == wasmcheck.KindFunc {
			m.exports[name] = true
		}
	}
	return m
}

// Name is the name the module was first loaded under.
func (m *Module) Name() string { return m.name }

// Digest is the module's "sha256:<hex>" digest.
func (m *Module) Digest() string { return m.digest }

// Metadata returns the plugin's metadata, read and validated at load time.
func (m *Module) Metadata() abi.Metadata { return m.meta }

// Implements reports whether the plugin can answer export: the module exports it and the metadata does not
// say otherwise.
func (m *Module) Implements(export string) bool {
	return m.exports[export] && m.meta.Implements(export)
}

// init checks the export table, then reads and validates the metadata. Nothing else is called on a module
// that fails here.
func (m *Module) init(ctx context.Context) (err error) {
	// Every load failure after compilation is reported as a failed osm_metadata call.
	var st callStats
	defer m.observe(abi.ExportMetadata, time.Now(), &st, &err)
	for _, required := range []string{abi.ExportMetadata, abi.ExportRender} {
		if !m.exports[required] {
			return m.fail(abi.ExportMetadata, ReasonMissingExport, "module does not export "+required+"; is it an OSM plugin built with -buildmode=c-shared?", nil)
		}
	}
	out, err := m.call(ctx, abi.ExportMetadata, nil, &st)
	if err != nil {
		return err
	}
	var md abi.Metadata
	if err := json.Unmarshal(out, &md); err != nil {
		return m.fail(abi.ExportMetadata, ReasonInvalidOutput, "metadata is not valid JSON: "+err.Error(), err)
	}
	if err := abi.CheckVersion(md.ABIVersion); err != nil {
		return m.fail(abi.ExportMetadata, ReasonABIMismatch, err.Error(), err)
	}
	if err := md.Validate(); err != nil {
		return m.fail(abi.ExportMetadata, ReasonInvalidOutput, err.Error(), err)
	}
	if !md.Implements(abi.ExportRender) {
		return m.fail(abi.ExportMetadata, ReasonMissingExport, "metadata does not list osm_render", nil)
	}
	m.meta = md
	return nil
}

// Render calls osm_render. An empty req.ABIVersion is set to abi.Version.
func (m *Module) Render(ctx context.Context, req *abi.RenderRequest) (_ *abi.RenderResponse, err error) {
	var st callStats
	defer m.observe(abi.ExportRender, time.Now(), &st, &err)
	var resp abi.RenderResponse
	r := *req // a shallow copy: callers may share one request between goroutines
	if r.ABIVersion == "" {
		r.ABIVersion = abi.Version
	}
	if err := m.typedCall(ctx, abi.ExportRender, &r, &resp, &st); err != nil {
		return nil, err
	}
	if err := resp.Check(); err != nil {
		return nil, m.fail(abi.ExportRender, ReasonInvalidOutput, err.Error(), err)
	}
	return &resp, nil
}

// Validate calls osm_validate. Callers check Implements(abi.ExportValidate) first; a plugin without it
// accepts every profile its metadata matches.
func (m *Module) Validate(ctx context.Context, req *abi.ValidateRequest) (_ *abi.ValidateResponse, err error) {
	var st callStats
	defer m.observe(abi.ExportValidate, time.Now(), &st, &err)
	var resp abi.ValidateResponse
	r := *req // a shallow copy: callers may share one request between goroutines
	if r.ABIVersion == "" {
		r.ABIVersion = abi.Version
	}
	if err := m.typedCall(ctx, abi.ExportValidate, &r, &resp, &st); err != nil {
		return nil, err
	}
	if err := resp.Check(); err != nil {
		return nil, m.fail(abi.ExportValidate, ReasonInvalidOutput, err.Error(), err)
	}
	return &resp, nil
}

// Encode calls osm_encode.
func (m *Module) Encode(ctx context.Context, req *abi.EncodeRequest) (_ *abi.EncodeResponse, err error) {
	var st callStats
	defer m.observe(abi.ExportEncode, time.Now(), &st, &err)
	var resp abi.EncodeResponse
	r := *req // a shallow copy: callers may share one request between goroutines
	if r.ABIVersion == "" {
		r.ABIVersion = abi.Version
	}
	if err := m.typedCall(ctx, abi.ExportEncode, &r, &resp, &st); err != nil {
		return nil, err
	}
	if err := resp.Check(); err != nil {
		return nil, m.fail(abi.ExportEncode, ReasonInvalidOutput, err.Error(), err)
	}
	return &resp, nil
}

// typedCall encodes req, calls export and decodes the output into resp.
func (m *Module) typedCall(ctx context.Context, export string, req, resp any, st *callStats) error {
	if !m.Implements(export) {
		return m.fail(export, ReasonMissingExport, "plugin does not implement "+export, nil)
	}
	in, err := json.Marshal(req)
	if err != nil {
		return m.fail(export, ReasonInvalidInput, "cannot encode the request: "+err.Error(), err)
	}
	out, err := m.call(ctx, export, in, st)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(out, resp); err != nil {
		return m.fail(export, ReasonInvalidOutput, "output is not a valid "+export+" response: "+err.Error(), err)
	}
	return nil
}

// Call runs an export on raw input and returns its raw output. Render, Validate and Encode are the typed
// versions the host normally uses.
func (m *Module) Call(ctx context.Context, export string, in []byte) (_ []byte, err error) {
	var st callStats
	defer m.observe(export, time.Now(), &st, &err)
	if !m.exports[export] {
		return nil, m.fail(export, ReasonMissingExport, "module does not export "+export, nil)
	}
	return m.call(ctx, export, in, &st)
}

// callStats is what a call measured, for the Called hook.
type callStats struct {
	memory uint64
}

// call runs export on a fresh instance, within the memory budget and the timeout.
func (m *Module) call(ctx context.Context, export string, in []byte, st *callStats) ([]byte, error) {
	m.mu.RLock()
	if m.closed {
		m.mu.RUnlock()
		return nil, m.fail(export, ReasonClosed, "module is closed", nil)
	}
	m.inflight.Add(1)
	m.mu.RUnlock()
	defer m.inflight.Done()

	cfg := &m.rt.cfg
	if len(in) > cfg.MaxRequestBytes {
		return nil, m.fail(export, ReasonInvalidInput, fmt.Sprintf("request of %d bytes exceeds the limit of %d bytes", len(in), cfg.MaxRequestBytes), nil)
	}
	// The instance's worst case is reserved before it exists, so that concurrent calls never hold more linear
	// memory than the budget, whatever their guests do.
	reserve := cfg.callMemory()
	if err := m.rt.memory.acquire(ctx, reserve); err != nil {
		return nil, m.fail(export, ReasonCanceled, "canceled while waiting for memory (budget "+mib(cfg.MemoryBudget)+" in use): "+err.Error(), err)
	}
	defer m.rt.memory.release(reserve)

	callCtx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	inst, err := m.newInstance(callCtx)
	if err != nil {
		return nil, inst.classify(ctx, callCtx, m, export, fmt.Errorf("cannot instantiate module: %w", err))
	}
	defer inst.close()
	res := inst.call(ctx, callCtx, m, export, in)
	st.memory = inst.memory.bytes()
	m.emitOutput(inst, export)
	if res.fail != nil {
		return nil, res.fail
	}
	return res.out, nil
}

func (m *Module) emitOutput(inst *instance, export string) {
	for _, s := range []struct {
		name string
		c    *capture
	}{{"stderr", inst.stderr}, {"stdout", inst.stdout}} {
		text, truncated := s.c.take()
		if text != "" {
			m.rt.cfg.Hooks.output(OutputEvent{Plugin: m.name, Digest: m.digest, Export: export, Stream: s.name, Text: text, Truncated: truncated})
		}
	}
}

// Close waits for running calls (each bounded by the timeout), then frees the module's code.
func (m *Module) Close(ctx context.Context) error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil
	}
	m.closed = true
	m.mu.Unlock()
	m.inflight.Wait()
	if m.image != nil {
		m.image.close()
	}
	return m.compiled.Close(ctx)
}

// observe reports a finished call to the Called hook, after the output was checked, so that invalid output
// counts as a failure.
func (m *Module) observe(export string, start time.Time, st *callStats, errp *error) {
	ev := CallEvent{Plugin: m.name, Digest: m.digest, Export: export, Duration: time.Since(start), Memory: st.memory}
	if *errp != nil && !errors.As(*errp, &ev.Err) {
		ev.Err = m.fail(export, "", (*errp).Error(), *errp)
	}
	m.rt.cfg.Hooks.called(ev)
}

func (m *Module) fail(export string, reason Reason, detail string, err error) *Error {
	return &Error{Plugin: m.name, Digest: m.digest, Export: export, Reason: reason, Detail: detail, Err: err}
}

func (m *Module) failStderr(export string, reason Reason, detail, stderr string, err error) *Error {
	e := m.fail(export, reason, detail, err)
	e.Stderr = stderr
	return e
}

func mib(n uint64) string { return fmt.Sprintf("%d MiB", n>>20) }
