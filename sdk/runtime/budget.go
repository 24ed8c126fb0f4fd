package runtime

import (
	"context"
	"sync"
)

// budget is a weighted semaphore over bytes of linear memory, shared by all modules of a Runtime. Waiters are
// served in arrival order, so a large reservation is not starved by a stream of small ones.
type budget struct {
	mu      sync.Mutex
	size    uint64
	used    uint64
	peak    uint64
	waiters []*waiter
}

type waiter struct {
	n     uint64
	ready chan struct{}
}

func newBudget(size uint64) *budget { return &budget{size: size} }

// acquire reserves n bytes, waiting until they are free or ctx ends. n must not exceed the size.
func (b *budget) acquire(ctx context.Context, n uint64) error {
	b.mu.Lock()
	if len(b.waiters) == 0 && b.used+n <= b.size {
		b.take(n)
		b.mu.Unlock()
		return nil
	}
	w := &waiter{n: n, ready: make(chan struct{})}
	b.waiters = append(b.waiters, w)
	b.mu.Unlock()
	select {
	case <-w.ready:
		return nil
	case <-ctx.Done():
		b.mu.Lock()
		defer b.mu.Unlock()
		select {
		case <-w.ready: // granted meanwhile: give it back
			b.used -= n
			b.grant()
		default:
			for i, o := range b.waiters {
				if o == w {
					b.waiters = append(b.waiters[:i], b.waiters[i+1:]...)
					break
				}
			}
			b.grant() // a large waiter leaving may unblock smaller ones behind it
		}
		return ctx.Err()
	}
}

// release returns n bytes.
func (b *budget) release(n uint64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.used -= n
	b.grant()
}

// grant wakes the waiters at the head of the queue that now fit. b.mu is held.
func (b *budget) grant() {
	for len(b.waiters) > 0 && b.used+b.waiters[0].n <= b.size {
		w := b.waiters[0]
		b.waiters = b.waiters[1:]
		b.take(w.n)
		close(w.ready)
	}
}

func (b *budget) take(n uint64) {
	b.used += n
	b.peak = max(b.peak, b.used)
}

// stats returns the bytes reserved now and the most ever reserved at once.
func (b *budget) stats() (used, peak uint64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used, b.peak
}
