package runtime

import (
	"context"
	"fmt"

	"github.com/osmhq/osm/sdk/abi"
)

// Session runs a few calls for one MachineDeployment — the render of each stage, the encoding — on one fresh
// instance, which Close discards. Nothing of the instance outlives the session, so no state passes from one
// MachineDeployment to the next, while a MachineDeployment pays for one instance (Go's runtime start-up in the
// guest: most of a call's cost) instead of one per call. The instance's memory stays reserved from the budget
// until Close. A call that fails discards the instance; the session's next call gets a fresh one, under the
// same reservation.
// A Session is not safe for concurrent use.
type Session struct {
	m       *Module
	inst    *instance
	reserve uint64
}

// Session starts a session: it reserves the instance's memory and creates the instance, both bounded by ctx
// and, for the instance's start-up, by the call timeout.
func (m *Module) Session(ctx context.Context) (*Session, error) {
	m.mu.RLock()
	if m.closed {
		m.mu.RUnlock()
		return nil, m.fail("", ReasonClosed, "module is closed", nil)
	}
	m.inflight.Add(1)
	m.mu.RUnlock()
	cfg := &m.rt.cfg
	reserve := cfg.callMemory()
	if err := m.rt.memory.acquire(ctx, reserve); err != nil {
		m.inflight.Done()
		return nil, m.fail("", ReasonCanceled, "canceled while waiting for memory (budget "+mib(cfg.MemoryBudget)+" in use): "+err.Error(), err)
	}
	startCtx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	inst, err := m.newInstance(startCtx)
	if err != nil {
		inst.close()
		m.rt.memory.release(reserve)
		m.inflight.Done()
		return nil, inst.classify(ctx, startCtx, m, "", fmt.Errorf("cannot instantiate module: %w", err))
	}
	return &Session{m: m, inst: inst, reserve: reserve}, nil
}

// Render calls osm_render on the session's instance.
func (s *Session) Render(ctx context.Context, req *abi.RenderRequest) (*abi.RenderResponse, error) {
	return s.m.render(ctx, req, s)
}

// Encode calls osm_encode on the session's instance.
func (s *Session) Encode(ctx context.Context, req *abi.EncodeRequest) (*abi.EncodeResponse, error) {
	return s.m.encode(ctx, req, s)
}

// Close discards the instance and returns its memory to the budget. Calling it again does nothing.
func (s *Session) Close() {
	if s.m == nil {
		return
	}
	s.discard()
	s.m.rt.memory.release(s.reserve)
	s.m.inflight.Done()
	s.m = nil
}

// discard closes the instance; the session's next call creates a fresh one.
func (s *Session) discard() {
	if s.inst != nil {
		s.inst.close()
		s.inst = nil
	}
}

// call runs export on the session's instance within the call timeout.
func (s *Session) call(ctx context.Context, export string, in []byte, st *callStats) ([]byte, error) {
	m := s.m
	callCtx, cancel := context.WithTimeout(ctx, m.rt.cfg.Timeout)
	defer cancel()
	if s.inst == nil {
		inst, err := m.newInstance(callCtx)
		if err != nil {
			inst.close()
			return nil, inst.classify(ctx, callCtx, m, export, fmt.Errorf("cannot instantiate module: %w", err))
		}
		s.inst = inst
	}
	res := s.inst.call(ctx, callCtx, m, export, in)
	st.memory = s.inst.memory.bytes()
	m.emitOutput(s.inst, export)
	if res.fail != nil {
		s.discard() // a trap, a timeout or garbage: the instance's state is suspect
		return nil, res.fail
	}
	return res.out, nil
}
