package osc

import (
	"context"
	"fmt"

	"github.com/go-logr/logr"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/osmhq/osm/host/controllers/internal/failure"
)

// Every write a stale read could make wrong is conditional on what the reconcile read: an update or a
// finalizer patch carries the resourceVersion read, a delete the UID read, a create fails if the object exists
// (only the OSC status patch is not: the status is OSM's alone). A cache that had not seen a newer object
// therefore cannot make a write wrong; the write fails as Outdated (failure.IsOutdated), and nothing is
// reported.
//
// What keeps such a cache from making writes or renders wasted is awaitPrevious: a reconcile of a
// MachineDeployment starts only once its caches show every object the previous reconcile of it wrote, and
// every object a write of that one met newer than it had read (Reconciler.pending). The workqueue never runs
// two reconciles of one MachineDeployment at once, so each starts from caches at least as new as the API
// server's answers to the previous one. A reconcile triggered right after one that wrote everything (the
// profile's status catching up, the watch events of its own writes) finds it all current, with its
// finalizer, and renders and writes nothing; a placeholder OSC written by a failed reconcile is in the cache
// when the next one replaces it; an Outdated write is requeued at once, and its retry waits for a cache that
// has seen what it met. The wait is at the start of the next reconcile rather than the end of the one that
// wrote: a worker is held only when a reconcile comes before the caches caught up, not after every write
// (by the time the watch events of the writes bring the MachineDeployment back, the caches mostly have them).

// cacheCatchUp bounds how long a reconcile waits for its caches. They normally show a write within
// milliseconds; should they fall further behind, the next reconcile meets the conditional writes above.
const cacheCatchUp = 10 * time.Second

// cachePoll is how often the caches are looked at while waiting: a look is a local read.
const cachePoll = 5 * time.Millisecond

// version is how a reconcile read an object: its UID and resourceVersion, zero when it found none.
type version struct {
	uid types.UID
	rv  string
}

// versionOf is how the reconcile read o, a nil pointer when it found nothing.
func versionOf[T interface {
	*E
	client.Object
}, E any](o T) version {
	if o == nil {
		return version{}
	}
	return version{o.GetUID(), o.GetResourceVersion()}
}

// expectation is a cache showing an object at another version than the reconcile read.
type expectation struct {
	cache client.Reader
	// obj is what the cache is read into; its namespace and name are the object's.
	obj    client.Object
	before version
	// gone counts the object's deletion as having moved on (a MachineDeployment whose finalizer was removed).
	gone bool
	// also is a further condition on what the cache shows, when the version alone does not tell.
	also func(client.Object) bool
	// at is when the write was answered (st.expect sets it).
	at time.Time
}

// met reports whether the cache shows the object past the write. An object the cache saw deleted since the
// write counts too: it was there and went, and will not come back by waiting.
func (e expectation) met(ctx context.Context, deleted *deletions) bool {
	o := e.obj.DeepCopyObject().(client.Object)
	if err := e.cache.Get(ctx, client.ObjectKeyFromObject(e.obj), o); err != nil {
		return apierrors.IsNotFound(err) && (e.gone || deleted.since(e.obj, e.at))
	}
	return version{o.GetUID(), o.GetResourceVersion()} != e.before && (e.also == nil || e.also(o))
}

// expect records that the next reconcile must find e met, after a write that ended with err: one that
// succeeded, or one the API server refused as Outdated. After any other failure the cache has nothing new to
// show.
func (st *state) expect(err error, e expectation) {
	if err != nil && !failure.IsOutdated(err) {
		return
	}
	e.at = time.Now()
	st.mu.Lock()
	defer st.mu.Unlock()
	st.expected = append(st.expected, e)
}

// awaitPrevious waits until every expectation the previous reconcile of key left is met, or cacheCatchUp has
// passed since it ended.
func (r *Reconciler) awaitPrevious(ctx context.Context, key types.NamespacedName) {
	v, ok := r.pending.LoadAndDelete(key)
	if !ok {
		return
	}
	p := v.(pendingWrites)
	left := cacheCatchUp - time.Since(p.at)
	if left <= 0 {
		return
	}
	expected := p.expected
	err := wait.PollUntilContextTimeout(ctx, cachePoll, left, true, func(ctx context.Context) (bool, error) {
		for len(expected) > 0 && expected[0].met(ctx, &r.deleted) {
			expected = expected[1:]
		}
		return len(expected) == 0, nil
	})
	if err != nil && len(expected) > 0 {
		e := expected[0]
		logr.FromContextOrDiscard(ctx).V(1).Info("the caches did not show the previous reconcile's writes in time; reconciling anyway",
			"waited", left.Round(time.Millisecond).String(), "kind", fmt.Sprintf("%T", e.obj), "object", client.ObjectKeyFromObject(e.obj))
	}
}

// pendingWrites are the expectations a reconcile left for the next one, and when it ended.
type pendingWrites struct {
	expected []expectation
	at       time.Time
}

// leave hands the reconcile's expectations to the next reconcile of key.
func (r *Reconciler) leave(key types.NamespacedName, st *state) {
	if len(st.expected) > 0 {
		r.pending.Store(key, pendingWrites{expected: st.expected, at: time.Now()})
	}
}
