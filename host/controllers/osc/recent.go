package osc

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// recentWindow is how long a write is remembered: far longer than a cache lags behind its own writes.
const recentWindow = time.Minute

// recentWrites remembers the MachineDeployments whose user-data this process wrote within recentWindow. A
// reconcile that finds their objects missing or outdated in the cache reads them from the API server before
// deciding to render: the cache may not have seen the writes yet.
type recentWrites struct {
	mu  sync.Mutex
	at  map[types.UID]time.Time
	now func() time.Time // time.Now; tests set it
}

func (w *recentWrites) note(uid types.UID) {
	w.mu.Lock()
	defer w.mu.Unlock()
	now := w.clock()
	if w.at == nil {
		w.at = map[types.UID]time.Time{}
	}
	if len(w.at) >= 1024 {
		// Bounded by the MachineDeployments written in one window; pruning on insert keeps it so.
		for uid, t := range w.at {
			if now.Sub(t) >= recentWindow {
				delete(w.at, uid)
			}
		}
	}
	w.at[uid] = now
}

func (w *recentWrites) wrote(uid types.UID) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	t, ok := w.at[uid]
	return ok && w.clock().Sub(t) < recentWindow
}

func (w *recentWrites) clock() time.Time {
	if w.now != nil {
		return w.now()
	}
	return time.Now()
}
