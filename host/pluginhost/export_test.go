package pluginhost

import "context"

// InFlight counts the operations in flight on m's host.
func (s *Supervisor) InFlight(m Module) int {
	s.mu.Lock()
	h := s.hosts[hostKey(m)]
	users := 0
	if h != nil {
		users = h.users
	}
	s.mu.Unlock()
	if h == nil {
		return 0
	}
	h.p.mu.Lock()
	defer h.p.mu.Unlock()
	n := len(h.p.pending)
	if n == 0 && users > 0 {
		n = users
	}
	return n
}

// Hold keeps m's host busy, as an operation would, until release is closed.
func (s *Supervisor) Hold(ctx context.Context, m Module, release <-chan struct{}) error {
	if err := s.prepare(ctx, m); err != nil {
		return err
	}
	h, err := s.acquire(ctx, m)
	if err != nil {
		return err
	}
	<-release
	s.release(h)
	return nil
}
