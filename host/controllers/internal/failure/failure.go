// Package failure is the taxonomy of reconcile failures the reconcilers share: what a failure is reported as
// (its reason, on a False condition and on a Warning event) and what the reconciler does next.
//
//   - Stall: retrying cannot help (a missing profile, a template error, an unsupported combination). The
//     failure is reported and nothing is requeued: a change to a watched object brings the object back.
//   - Retry: the same inputs may succeed later (a plugin that timed out on a busy node, a name conflict whose
//     resolution may have been missed across a restart). The failure is reported and tried again after a
//     long pause (Policy.Retry).
//   - Wait: something is under way, or awaited from someone, that no watch reports (a plugin image being
//     pulled, a Secret an operator is to create). The failure is reported and looked at again soon.
//
// Any other error is a failure to talk to the API server, which controller-runtime retries with backoff.
package failure

import (
	"errors"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"

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
)

func (a Action) String() string {
	switch a {
	case Retry:
		return "retry"
	case Wait:
		return "wait"
	default:
		return "stall"
	}
}

// Error is a classified reconcile failure.
type Error struct {
	Action Action
	// Reason is the condition reason (one of the osmv1alpha1.Reason* constants) and the event's reason.
	Reason string
	Err    error
	// After is how soon a Wait looks again; zero means Policy.Wait.
	After time.Duration
}

func (e *Error) Error() string { return e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// Stalled is a failure that retrying cannot fix.
func Stalled(reason string, err error) *Error { return &Error{Action: Stall, Reason: reason, Err: err} }

// Retrying is a failure the same inputs may not repeat.
func Retrying(reason string, err error) *Error {
	return &Error{Action: Retry, Reason: reason, Err: err}
}

// Waiting is a failure that ends when something under way or awaited happens; after zero means Policy.Wait.
func Waiting(reason string, err error, after time.Duration) *Error {
	return &Error{Action: Wait, Reason: reason, Err: err, After: after}
}

// As returns the classified failure in err's chain.
func As(err error) (*Error, bool) {
	var f *Error
	ok := errors.As(err, &f)
	return f, ok
}

// FromRender classifies a failure of the render pipeline: Wait while a plugin image is still being pulled (for
// as long as the pull says), Retry when the render says the same inputs may succeed later
// (render.Transient), Stall otherwise.
func FromRender(err error) *Error {
	reason := render.Reason(err)
	var pending interface{ RetryAfter() time.Duration }
	switch {
	case errors.As(err, &pending):
		return Waiting(reason, err, pending.RetryAfter())
	case render.Transient(err):
		return Retrying(reason, err)
	default:
		return Stalled(reason, err)
	}
}

// CacheBehind is how soon a reconcile whose write conflicted with what the cache showed (the cache a step
// behind our own writes, or another writer's) runs again, reading what is really there.
const CacheBehind = 100 * time.Millisecond

// Policy holds the requeue intervals of a reconciler.
type Policy struct {
	// Retry is the pause before a Retry failure is tried again; zero waits for a change like a Stall.
	Retry time.Duration
	// Wait is how soon a Wait failure without its own interval is looked at again.
	Wait time.Duration
}

// Result is what a reconcile returns to controller-runtime for err, once err has been reported: the requeue of
// a classified failure, a requeue after CacheBehind for a conflict or an object that already exists, and err
// itself (retried with backoff) otherwise.
func (p Policy) Result(err error) (ctrl.Result, error) {
	if err == nil {
		return ctrl.Result{}, nil
	}
	if f, ok := As(err); ok {
		switch f.Action {
		case Retry:
			return ctrl.Result{RequeueAfter: p.Retry}, nil
		case Wait:
			if f.After > 0 {
				return ctrl.Result{RequeueAfter: f.After}, nil
			}
			return ctrl.Result{RequeueAfter: p.Wait}, nil
		default:
			return ctrl.Result{}, nil
		}
	}
	if apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) {
		return ctrl.Result{RequeueAfter: CacheBehind}, nil
	}
	return ctrl.Result{}, err
}
