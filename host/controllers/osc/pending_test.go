package osc

import (
	"context"
	"testing"
	"time"

	osmv1alpha1 "github.com/osmhq/osm/crds/osm/v1alpha1"
	"github.com/osmhq/osm/host/plugin"
	"github.com/osmhq/osm/host/render"
)

// TestPendingPluginRetriesSoon: a render whose plugin image is still being pulled in the background returns
// at once and is retried after the pending error's short delay, not after the long stall of a failed pull.
func TestPendingPluginRetriesSoon(t *testing.T) {
	r := &Reconciler{StalledRetry: 10 * time.Minute}
	pull := &plugin.PendingError{Image: "r/p@sha256:00", For: time.Second}
	pending := &render.Error{Reason: osmv1alpha1.ReasonPluginPullFailed, Err: pull}
	s, ok := isStalling(r.renderFailure(context.Background(), pending))
	if !ok || s.retryAfter != pull.RetryAfter() {
		t.Errorf("pending plugin: stalling=%v retryAfter=%v", ok, s)
	}
	failed := &render.Error{Reason: osmv1alpha1.ReasonPluginPullFailed, Err: context.DeadlineExceeded}
	if s, ok := isStalling(r.renderFailure(context.Background(), failed)); !ok || s.retryAfter != 10*time.Minute {
		t.Errorf("failed pull: stalling=%v %+v", ok, s)
	}
}
