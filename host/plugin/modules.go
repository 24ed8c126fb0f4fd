package plugin

import (
	"container/list"
	"context"
	"time"

	"github.com/osmhq/osm/sdk/runtime"
)

// modules tracks the modules loaded in the plugin host (by module digest) so that their number stays within
// Config.MaxLoadedModules and idle ones are unloaded. A module is pinned while a call uses it, so an unload
// never breaks a render: only modules without a call in flight sit in the idle list and can be chosen.
// Unloading tells the host to free the module's code; a reload is served by the disk cache in a tenth of a
// second.
type modules struct {
	slots map[string]*slot
	// idle holds the slots without calls, least recently used first.
	idle list.List
	// unloading counts slots being unloaded; they no longer count against the bound.
	unloading int
	// failed remembers modules that failed to load for a reason retrying will not fix, so a broken plugin
	// referenced by many MachineDeployments costs one compile, not one per reconcile.
	failed map[string]error
}

// maxRememberedFailures bounds modules.failed.
const maxRememberedFailures = 256

// slot is one module digest that is loaded, being loaded, or being unloaded.
type slot struct {
	digest   string
	refs     int
	lastUsed time.Time
	elem     *list.Element // in modules.idle while refs == 0
	// loading is closed when the first holder finished loading; mod or err is then set.
	loading chan struct{}
	mod     *module
	err     error
	// unloading is closed when the module is unloaded; a slot with it set cannot be held.
	unloading chan struct{}
	// owner is the Plugin that loaded the module; shared says another one used it since, so Discard by the
	// owner must leave it loaded.
	owner  *byte
	shared bool
}

func (ms *modules) init() {
	ms.slots = map[string]*slot{}
	ms.failed = map[string]error{}
}

// Loaded returns how many modules are loaded or being loaded.
func (m *Manager) Loaded() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.mods.slots) - m.mods.unloading
}

// loadFunc loads a module into the plugin host.
type loadFunc func(ctx context.Context) (*module, error)

// acquire returns the module with the digest, pinned until release is called. If it is not loaded, load
// loads it; with load nil, acquire returns a nil module instead.
func (m *Manager) acquire(ctx context.Context, digest string, owner *byte, load loadFunc) (mod *module, release func(), err error) {
	if m.ctx.Err() != nil {
		return nil, nil, &runtime.Error{Digest: digest, Reason: runtime.ReasonClosed, Detail: "the plugin manager is closed"}
	}
	m.mu.Lock()
	if err, ok := m.mods.failed[digest]; ok {
		m.mu.Unlock()
		return nil, nil, err
	}
	m.mu.Unlock()
	s, first := m.hold(digest, owner, load != nil)
	if s == nil {
		return nil, nil, nil
	}
	if first {
		m.load(ctx, s, load)
	} else {
		select {
		case <-s.loading:
		case <-ctx.Done():
			m.unhold(s)
			return nil, nil, &runtime.Error{Digest: digest, Reason: runtime.ReasonCanceled, Detail: "waiting for the module to load: " + ctx.Err().Error(), Err: ctx.Err()}
		}
		if s.err == nil {
			m.metrics.cacheHits.WithLabelValues(string(runtime.LayerMemory)).Inc()
		}
	}
	if s.err != nil {
		err := s.err
		m.unhold(s)
		return nil, nil, err
	}
	return s.mod, func() { m.unhold(s) }, nil
}

// load runs the first holder's load in the plugin host, and publishes the outcome. The host compiles (two
// at a time, sdk/runtime's lanes); the controller only waits.
func (m *Manager) load(ctx context.Context, s *slot, load loadFunc) {
	defer close(s.loading)
	if s.mod, s.err = load(ctx); s.err != nil {
		if !mayPass(s.err) {
			m.mu.Lock()
			if len(m.mods.failed) >= maxRememberedFailures {
				for k := range m.mods.failed {
					delete(m.mods.failed, k)
					break
				}
			}
			m.mods.failed[s.digest] = s.err
			m.mu.Unlock()
		}
		return
	}
	m.remember(s.mod)
}

// hold pins the slot of digest after any unload of it in progress has finished, creating the slot if create
// is set (first then says the caller must load it). A new slot may push another module out.
func (m *Manager) hold(digest string, owner *byte, create bool) (s *slot, first bool) {
	m.mu.Lock()
	for {
		s, ok := m.mods.slots[digest]
		if !ok {
			if !create {
				m.mu.Unlock()
				return nil, false
			}
			s = &slot{digest: digest, owner: owner, refs: 1, loading: make(chan struct{})}
			m.mods.slots[digest] = s
			victims := m.pickVictims(0)
			m.mu.Unlock()
			m.unload(victims)
			m.metrics.loaded.Set(float64(m.Loaded()))
			return s, true
		}
		if s.unloading != nil {
			ch := s.unloading
			m.mu.Unlock()
			<-ch
			m.mu.Lock()
			continue
		}
		switch {
		case s.owner == nil:
			s.owner = owner // loaded by a background pull: the first Plugin to use it owns it
		case s.owner != owner:
			s.shared = true
		}
		if s.refs == 0 {
			m.mods.idle.Remove(s.elem)
			s.elem = nil
		}
		s.refs++
		m.mu.Unlock()
		return s, false
	}
}

// unhold releases a pin. The last pin of a slot whose load failed unloads it at once; otherwise the slot
// becomes idle, and the bound may unload the least recently used idle ones.
func (m *Manager) unhold(s *slot) {
	m.mu.Lock()
	s.refs--
	s.lastUsed = time.Now()
	if s.refs > 0 {
		m.mu.Unlock()
		return
	}
	var victims []*slot
	select {
	case <-s.loading:
		if s.err != nil {
			// Closing the runtime of a load that was canceled waits for its compile to end: not here.
			go m.unload([]*slot{m.markUnloading(s)})
		} else {
			s.elem = m.mods.idle.PushBack(s)
			victims = m.pickVictims(0)
		}
	default: // a waiter gave up while the first holder still loads; the loader's unhold settles it
	}
	m.mu.Unlock()
	m.unload(victims)
}

// pickVictims marks idle slots for unloading: the least recently used ones while more than the bound are
// loaded, and, with idleFor > 0, every one unused for that long. Called with m.mu held.
func (m *Manager) pickVictims(idleFor time.Duration) []*slot {
	var victims []*slot
	now := time.Now()
	for e := m.mods.idle.Front(); e != nil; {
		s := e.Value.(*slot)
		next := e.Next()
		over := len(m.mods.slots)-m.mods.unloading > m.cfg.MaxLoadedModules
		if !over && (idleFor <= 0 || now.Sub(s.lastUsed) < idleFor) {
			break // the list is ordered by last use: the rest is newer
		}
		victims = append(victims, m.markUnloading(s))
		e = next
	}
	return victims
}

// markUnloading takes a slot without pins out of service. Called with m.mu held.
func (m *Manager) markUnloading(s *slot) *slot {
	if s.elem != nil {
		m.mods.idle.Remove(s.elem)
		s.elem = nil
	}
	s.unloading = make(chan struct{})
	m.mods.unloading++
	return s
}

// unload tells the plugin host to free the marked slots' modules and forgets the slots, waking anyone
// waiting to hold them.
func (m *Manager) unload(victims []*slot) {
	for _, s := range victims {
		if s.mod != nil {
			m.host.Unload(s.digest)
		}
		m.mu.Lock()
		delete(m.mods.slots, s.digest)
		m.mods.unloading--
		close(s.unloading)
		m.mu.Unlock()
		if s.err == nil {
			m.metrics.evictions.Inc()
			m.log.V(1).Info("unloaded plugin", "digest", s.digest)
		}
	}
	if len(victims) > 0 {
		m.metrics.loaded.Set(float64(m.Loaded()))
	}
}

// discard unloads the module owner loaded, unless a call is in flight or another Plugin used it.
func (m *Manager) discard(digest string, owner *byte) {
	m.mu.Lock()
	s, ok := m.mods.slots[digest]
	if !ok || s.refs > 0 || s.unloading != nil || s.owner != owner || s.shared {
		m.mu.Unlock()
		return
	}
	victims := []*slot{m.markUnloading(s)}
	m.mu.Unlock()
	m.unload(victims)
}

// unloadAll unloads every module, for Close; pinned ones after their calls end.
func (m *Manager) unloadAll() {
	for {
		m.mu.Lock()
		var victims []*slot
		var busy chan struct{}
		for _, s := range m.mods.slots {
			switch {
			case s.unloading != nil:
				busy = s.unloading
			case s.refs == 0:
				victims = append(victims, m.markUnloading(s))
			}
		}
		n := len(m.mods.slots)
		m.mu.Unlock()
		m.unload(victims)
		if n == 0 {
			return
		}
		if len(victims) == 0 {
			if busy != nil {
				<-busy
			} else {
				time.Sleep(10 * time.Millisecond) // calls in flight end within the plugin timeout
			}
		}
	}
}

// startJanitor unloads modules idle for longer than Config.IdleTimeout, checking at a fraction of it.
func (m *Manager) startJanitor() {
	ttl := m.cfg.IdleTimeout
	if ttl < 0 {
		return
	}
	every := min(max(ttl/4, 10*time.Millisecond), time.Minute)
	m.janitor.Add(1)
	go func() {
		defer m.janitor.Done()
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-m.ctx.Done():
				return
			case <-t.C:
				m.mu.Lock()
				victims := m.pickVictims(ttl)
				m.mu.Unlock()
				m.unload(victims)
			}
		}
	}()
}
