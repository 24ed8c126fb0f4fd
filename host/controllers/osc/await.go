package osc

import (
	"context"
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
// What keeps such a cache from making writes or renders wasted is awaitCaches: a reconcile returns only once
// its caches show every object it wrote, and every object a write of it met newer than it had read. The
// workqueue never runs two reconciles of one MachineDeployment at once, so the next reconcile of it starts
// from caches at least as new as the API server's answers to the previous one. A reconcile triggered right
// after one that wrote everything (the profile's status catching up, the watch events of its own writes)
// finds it all current, with its finalizer, and renders and writes nothing; a placeholder OSC written by a
// failed reconcile is in the cache when the next one replaces it; an Outdated write is requeued at once, on
// a cache that has seen what it met.

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
}

func (e expectation) met(ctx context.Context) bool {
	o := e.obj.DeepCopyObject().(client.Object)
	if err := e.cache.Get(ctx, client.ObjectKeyFromObject(e.obj), o); err != nil {
		return e.gone && apierrors.IsNotFound(err)
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
	st.mu.Lock()
	defer st.mu.Unlock()
	st.expected = append(st.expected, e)
}

// awaitCaches waits until every expectation of the reconcile is met, or cacheCatchUp has passed.
func (r *Reconciler) awaitCaches(ctx context.Context, st *state) {
	if len(st.expected) == 0 {
		return
	}
	_ = wait.PollUntilContextTimeout(ctx, cachePoll, cacheCatchUp, true, func(ctx context.Context) (bool, error) {
		for len(st.expected) > 0 && st.expected[0].met(ctx) {
			st.expected = st.expected[1:]
		}
		return len(st.expected) == 0, nil
	})
}
