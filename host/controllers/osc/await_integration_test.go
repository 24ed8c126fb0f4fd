package osc_test

import (
	"context"
	"io"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	clusterv1alpha1 "github.com/osmhq/osm/crds/cluster/v1alpha1"
	osmv1alpha1 "github.com/osmhq/osm/crds/osm/v1alpha1"
	"github.com/osmhq/osm/host/controllers/osc"
	"github.com/osmhq/osm/host/credentials"
	"github.com/osmhq/osm/host/testenv"
)

// laggingWatches delays every read of a watch response by lag.
type laggingWatches struct {
	http.RoundTripper
	lag time.Duration
}

func (l laggingWatches) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := l.RoundTripper.RoundTrip(req)
	if err == nil && req.URL.Query().Get("watch") == "true" {
		resp.Body = &laggingBody{resp.Body, l.lag}
	}
	return resp, err
}

type laggingBody struct {
	io.ReadCloser
	lag time.Duration
}

func (b *laggingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	time.Sleep(b.lag) // the lag under test
	return n, err
}

// TestAReconcileRightAfterOneThatWroteFindsItCurrent runs the reconciler on informer caches a little behind
// the API server, as the controller's are, and reconciles a new MachineDeployment twice in a row, as a profile's status catching up or the watch
// events of its own writes make it do. The first reconcile writes everything; the second must find it all
// current in its caches (the first returned only once they showed its writes): no render, no write.
func TestAReconcileRightAfterOneThatWroteFindsItCurrent(t *testing.T) {
	env, ctx, c, _, r, md := finalizerFixtureEnv(t, "osp-template")
	ctx, cancel := context.WithCancel(ctx)
	t.Cleanup(cancel)
	// Watch events reach the caches 50 ms late, as on a busy API server.
	cfg := rest.CopyConfig(env.Config)
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { return laggingWatches{rt, 50 * time.Millisecond} }
	informers, err := cache.New(cfg, cache.Options{Scheme: testenv.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = informers.Start(ctx) }()
	if !informers.WaitForCacheSync(ctx) {
		t.Fatal("caches did not sync")
	}
	direct, err := client.NewWithWatch(env.Config, client.Options{Scheme: testenv.Scheme, Cache: &client.CacheOptions{Reader: informers}})
	if err != nil {
		t.Fatal(err)
	}
	// Every write the reconciler makes, whether the API server takes it or not.
	var writes atomic.Int64
	count := func() { writes.Add(1) }
	cached := interceptor.NewClient(direct, interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			count()
			return c.Create(ctx, obj, opts...)
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			count()
			return c.Update(ctx, obj, opts...)
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			count()
			return c.Patch(ctx, obj, patch, opts...)
		},
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			count()
			return c.Delete(ctx, obj, opts...)
		},
	})
	r.Mgmt, r.Worker, r.MgmtAPIReader = cached, cached, c
	r.Issuer.Client, r.Issuer.APIReader = cached, c
	skipped := osc.CountSkipped(r)
	req := ctrl.Request{NamespacedName: client.ObjectKeyFromObject(md)}
	// Start the informers the reconcile reads from, as a running controller has them.
	for _, l := range []client.ObjectList{&clusterv1alpha1.MachineDeploymentList{}, &osmv1alpha1.OperatingSystemProfileList{}, &corev1.SecretList{}} {
		if err := cached.List(ctx, l); err != nil {
			t.Fatal(err)
		}
	}
	for _, m := range []client.Object{osc.OSCMeta(), credentials.ReaderRoleMeta(), credentials.ReaderBindingMeta()} {
		if _, err := informers.GetInformer(ctx, m); err != nil {
			t.Fatal(err)
		}
	}

	if _, err := r.Reconcile(ctx, req); err != nil {
		t.Fatal(err)
	}
	writesBefore := writes.Load()
	if _, err := r.Reconcile(ctx, req); err != nil {
		t.Fatal(err)
	}
	if n := skipped(); n != 1 {
		t.Errorf("the reconcile right after the one that wrote everything rendered (%v reconciles found it current, want 1)", n)
	}
	if n := writes.Load() - writesBefore; n != 0 {
		t.Errorf("the reconcile right after the one that wrote everything wrote %d times, want none", n)
	}
}
