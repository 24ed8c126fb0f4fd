package failure

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	osmv1alpha1 "github.com/osmhq/osm/crds/osm/v1alpha1"
	"github.com/osmhq/osm/host/credentials"
	"github.com/osmhq/osm/host/plugin"
	"github.com/osmhq/osm/host/render"
)

// TestPolicy: how each failure is reported and when the reconciler looks again. A plugin image still being
// pulled is looked at again after the pull's short delay, not after the long pause of a failed pull; a render
// that fails the same way for the same inputs waits for a change; a missing plugin Secret is looked for again
// every Policy.Wait; a write that met a newer object than the cache showed is Outdated, requeued at once and
// reported as nothing; an API error is reported as WriteFailed and goes back to controller-runtime.
func TestPolicy(t *testing.T) {
	p := Policy{Retry: 10 * time.Minute, Wait: 15 * time.Second}
	pull := &plugin.PendingError{Image: "r/p@sha256:00", For: time.Second}
	apiErr := errors.New("connection refused")
	gr := schema.GroupResource{Resource: "secrets"}
	for _, tc := range []struct {
		name    string
		err     error
		action  Action
		reason  string
		requeue time.Duration
		err2    error
	}{
		{"pull pending", FromRender(&render.Error{Reason: osmv1alpha1.ReasonPluginPullFailed, Err: pull, Transient: true}),
			Wait, osmv1alpha1.ReasonPluginPullFailed, pull.RetryAfter(), nil},
		{"pull failed", FromRender(&render.Error{Reason: osmv1alpha1.ReasonPluginPullFailed, Err: context.DeadlineExceeded, Transient: true}),
			Retry, osmv1alpha1.ReasonPluginPullFailed, 10 * time.Minute, nil},
		{"template error", FromRender(fmt.Errorf("rendering: %w", &render.Error{Reason: osmv1alpha1.ReasonTemplateError, Err: errors.New("bad")})),
			Stall, osmv1alpha1.ReasonTemplateError, 0, nil},
		{"no reason", FromRender(errors.New("encoder broke")), Stall, osmv1alpha1.ReasonRenderFailed, 0, nil},
		{"plugin Secret missing", Waiting(osmv1alpha1.ReasonPluginSecretMissing, errors.New("Secret x does not exist"), 0),
			Wait, osmv1alpha1.ReasonPluginSecretMissing, 15 * time.Second, nil},
		{"credential in the way", FromCredentials(fmt.Errorf("creating Role: %w", &credentials.ConflictError{Kind: "Role", Name: "x", Owner: "a/b"})),
			Retry, osmv1alpha1.ReasonNameConflict, 10 * time.Minute, nil},
		{"credential API error", FromCredentials(apiErr), Backoff, osmv1alpha1.ReasonWriteFailed, 0, apiErr},
		{"name conflict, joined with another failure", errors.Join(apiErr, Retrying(osmv1alpha1.ReasonNameConflict, errors.New("owned by b"))),
			Retry, osmv1alpha1.ReasonNameConflict, 10 * time.Minute, nil},
		{"cache behind", apierrors.NewConflict(gr, "x", errors.New("modified")), Outdated, "", requeueNow, nil},
		{"already exists", fmt.Errorf("creating: %w", apierrors.NewAlreadyExists(gr, "x")), Outdated, "", requeueNow, nil},
		{"API error", apiErr, Backoff, osmv1alpha1.ReasonWriteFailed, 0, apiErr},
	} {
		f := Of(tc.err)
		if f.Action != tc.action || f.Reason != tc.reason || (f.Event == "") != (tc.action == Outdated) {
			t.Errorf("%s: classified as %+v, want %v %s", tc.name, f, tc.action, tc.reason)
		}
		res, err := p.Result(tc.err)
		if res.RequeueAfter != tc.requeue || !errors.Is(err, tc.err2) || (tc.err2 == nil) != (err == nil) {
			t.Errorf("%s: Result = %+v, %v; want requeue after %s, %v", tc.name, res, err, tc.requeue, tc.err2)
		}
	}
	if Of(nil) != nil {
		t.Error("nil classified as a failure")
	}
	if res, err := (Policy{}).Result(Retrying(osmv1alpha1.ReasonPluginFailed, errors.New("timeout"))); res.RequeueAfter != 0 || err != nil {
		t.Errorf("without a retry pause, a Retry waits for a change like a Stall: %+v %v", res, err)
	}
}
