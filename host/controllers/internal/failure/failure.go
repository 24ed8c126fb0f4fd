// Package failure is the one taxonomy of reconcile failures: every error a reconcile ends with is classified
// here (Of), by type, into what it is reported as (a condition reason and an event) and what the reconciler
// does next.
//
//   - Stall: retrying cannot help (a missing profile, a template error, an unsupported combination). The
//     failure is reported and nothing is requeued: a change to a watched object brings the object back.
//   - Retry: the same inputs may succeed later (a plugin that timed out on a busy node, a name conflict whose
//     resolution may have been missed across a restart). The failure is reported and tried again after a
//     long pause (Policy.Retry).
//   - Wait: something is under way, or awaited from someone, that no watch reports (a plugin image being
//     pulled, a Secret an operator is to create). The failure is reported and looked at again soon.
//   - Backoff: an API call failed. It is reported as WriteFailed and controller-runtime retries with backoff.
//   - Outdated: a write met a newer object than the cache showed (a Conflict, or AlreadyExists for a create).
//     Nothing is wrong, so nothing is reported; the reconcile runs again once its cache has caught up.
package failure

import (
	"errors"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"

	osmv1alpha1 "github.com/osmhq/osm/crds/osm/v1alpha1"
	"github.com/osmhq/osm/host/credentials"
	"github.com/osmhq/osm/host/render"
)

// Action is what a reconciler does after a failure.
type Action uint8

const (
	// Stall waits for a change to a watched object.
	Stall Action = iota
	// Retry tries again after Policy.Retry.
	Retry
	// Wait looks again after Error.After, or Policy.Wait when that is zero.
	Wait
	// Backoff returns the error to controller-runtime, which retries with backoff.
	Backoff
	// Outdated requeues at once: the reconciler has waited for its cache to show what the write met.
	Outdated
)

func (a Action) String() string {
	switch a {
	case Retry:
		return "retry"
	case Wait:
		return "wait"
	case Backoff:
		return "backoff"
	case Outdated:
		return "outdated"
	default:
		return "stall"
	}
}

// Error is a classified reconcile failure.
type Error struct {
	Action Action
	// Reason is the condition reason (one of the osmv1alpha1.Reason* constants) and the event's reason; empty
	// for Outdated, which is not reported.
	Reason string
	// Event is the type of the event the failure is recorded as (corev1.EventTypeWarning); empty records none.
	Event string
	Err   error
	// After is how soon a Wait looks again; zero means Policy.Wait.
	After time.Duration
}

func (e *Error) Error() string { return e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// Stalled is a failure that retrying cannot fix.
func Stalled(reason string, err error) *Error {
	return &Error{Action: Stall, Reason: reason, Event: corev1.EventTypeWarning, Err: err}
}

// Retrying is a failure the same inputs may not repeat.
func Retrying(reason string, err error) *Error {
	return &Error{Action: Retry, Reason: reason, Event: corev1.EventTypeWarning, Err: err}
}

// Waiting is a failure that ends when something under way or awaited happens; after zero means Policy.Wait.
func Waiting(reason string, err error, after time.Duration) *Error {
	return &Error{Action: Wait, Reason: reason, Event: corev1.EventTypeWarning, Err: err, After: after}
}

// Of classifies err: the failure in its chain when there is one, Outdated for a write the API server refused
// because the object is newer than the cache showed, Backoff for any other error; nil for nil.
func Of(err error) *Error {
	if err == nil {
		return nil
	}
	if f, ok := errors.AsType[*Error](err); ok {
		return f
	}
	if IsOutdated(err) {
		return &Error{Action: Outdated, Err: err}
	}
	return &Error{Action: Backoff, Reason: osmv1alpha1.ReasonWriteFailed, Event: corev1.EventTypeWarning, Err: err}
}

// IsOutdated reports whether err is the API server's answer to a write computed from an older object than
// it holds: a Conflict (a resourceVersion or UID precondition that failed) or AlreadyExists (a create of an
// object the cache did not show).
func IsOutdated(err error) bool {
	return apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err)
}

// FromRender classifies a failure of the render pipeline: Wait while a plugin image is still being pulled (for
// as long as the pull says), Retry when the render says the same inputs may succeed later
// (render.Transient), Stall otherwise.
func FromRender(err error) *Error {
	reason := render.Reason(err)
	if pending, ok := errors.AsType[interface {
		error
		RetryAfter() time.Duration
	}](err); ok {
		return Waiting(reason, err, pending.RetryAfter())
	}
	if render.Transient(err) {
		return Retrying(reason, err)
	}
	return Stalled(reason, err)
}

// FromCredentials classifies a failure to issue credentials: an object in the way (someone else's under the
// name OSM chose, credentials.ConflictError) is a NameConflict, retried only after a long pause: retrying soon
// will not fix it. Any other error is returned as it is (an API error).
func FromCredentials(err error) error {
	if _, ok := errors.AsType[*credentials.ConflictError](err); ok {
		return Retrying(osmv1alpha1.ReasonNameConflict, err)
	}
	return err
}

// requeueNow is the shortest requeue controller-runtime accepts: an Outdated failure needs no pause, the
// reconciler having waited for its cache before returning it.
const requeueNow = time.Nanosecond

// Policy holds the requeue intervals of a reconciler.
type Policy struct {
	// Retry is the pause before a Retry failure is tried again; zero waits for a change like a Stall.
	Retry time.Duration
	// Wait is how soon a Wait failure without its own interval is looked at again.
	Wait time.Duration
}

// Result is what a reconcile returns to controller-runtime for err, once err has been reported.
func (p Policy) Result(err error) (ctrl.Result, error) {
	f := Of(err)
	if f == nil {
		return ctrl.Result{}, nil
	}
	switch f.Action {
	case Retry:
		return ctrl.Result{RequeueAfter: p.Retry}, nil
	case Wait:
		if f.After > 0 {
			return ctrl.Result{RequeueAfter: f.After}, nil
		}
		return ctrl.Result{RequeueAfter: p.Wait}, nil
	case Outdated:
		return ctrl.Result{RequeueAfter: requeueNow}, nil
	case Backoff:
		return ctrl.Result{}, err
	default:
		return ctrl.Result{}, nil
	}
}
