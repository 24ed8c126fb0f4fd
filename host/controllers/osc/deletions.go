package osc

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/osmhq/osm/host/credentials"
)

// deletions are the objects the caches saw deleted in the last cacheCatchUp, by kind and key, and when. A
// reconcile expects the caches to show what it created (await.go); when someone deletes such an object right
// after, the cache never will, and the reconcile that the deletion brings must not wait cacheCatchUp for it
// (a Secret, token, Role or RoleBinding deleted by hand came back only after those 10 s). A deletion seen
// after the write shows the cache past it.
type deletions struct {
	mu   sync.Mutex
	seen map[deletionKey]time.Time
}

type deletionKey struct {
	kind string
	key  client.ObjectKey
}

// maxDeletions bounds the record; past it, entries older than cacheCatchUp are dropped, and should all be
// newer (a mass deletion), the whole record: waits for caches are an economy, never what makes a write right.
const maxDeletions = 4096

func (d *deletions) record(kind string, obj any) {
	if tomb, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	o, ok := obj.(client.Object)
	if !ok {
		return
	}
	now := time.Now()
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.seen == nil || len(d.seen) >= maxDeletions {
		for k, at := range d.seen {
			if now.Sub(at) > cacheCatchUp {
				delete(d.seen, k)
			}
		}
		if d.seen == nil || len(d.seen) >= maxDeletions {
			d.seen = map[deletionKey]time.Time{}
		}
	}
	d.seen[deletionKey{kind, client.ObjectKeyFromObject(o)}] = now
}

// since reports whether the cache saw obj's kind and key deleted after t.
func (d *deletions) since(obj client.Object, t time.Time) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	at, ok := d.seen[deletionKey{kindOf(obj), client.ObjectKeyFromObject(obj)}]
	return ok && at.After(t)
}

// kindOf names what an expectation reads: a metadata-only object by its kind, a Secret as Secret.
func kindOf(obj client.Object) string {
	if m, ok := obj.(*metav1.PartialObjectMetadata); ok {
		return m.Kind
	}
	if _, ok := obj.(*corev1.Secret); ok {
		return "Secret"
	}
	return fmt.Sprintf("%T", obj)
}

// watchDeletions records the deletions the caches see of every kind a reconcile expects to be created:
// user-data and token Secrets and the reader Role and RoleBinding (worker), OSCs (mgmt).
func (r *Reconciler) watchDeletions(ctx context.Context, mgmt, worker cache.Cache) error {
	for _, w := range []struct {
		c   cache.Cache
		obj client.Object
	}{
		{worker, &corev1.Secret{}},
		{worker, credentials.ReaderRoleMeta()},
		{worker, credentials.ReaderBindingMeta()},
		{mgmt, OSCMeta()},
	} {
		kind := kindOf(w.obj)
		inf, err := w.c.GetInformer(ctx, w.obj, cache.BlockUntilSynced(false))
		if err != nil {
			return fmt.Errorf("watching deletions of %s: %w", kind, err)
		}
		if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{DeleteFunc: func(obj any) { r.deleted.record(kind, obj) }}); err != nil {
			return fmt.Errorf("watching deletions of %s: %w", kind, err)
		}
	}
	return nil
}
