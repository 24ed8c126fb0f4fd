package render

import (
	"errors"

	osmv1alpha1 "github.com/osmhq/osm/crds/osm/v1alpha1"
)

// Error is a render failure with the condition reason that describes it (one of the osmv1alpha1.Reason*
// constants), so the controller can set a condition and an event an operator can act on, and whether
// rendering the same inputs again may succeed.
type Error struct {
	Reason string
	Err    error
	// Transient says the same inputs may render later: a plugin call or load that failed (it may have run out
	// of time on a busy node, or its host died) or a plugin image that could not be pulled. Every other render
	// failure names something wrong with the inputs, which only a change to them fixes.
	Transient bool
}

func (e *Error) Error() string { return e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// Reason returns the condition reason of err, or ReasonRenderFailed when err carries none.
func Reason(err error) string {
	if re, ok := errors.AsType[*Error](err); ok {
		return re.Reason
	}
	return osmv1alpha1.ReasonRenderFailed
}

// Transient reports whether rendering the same inputs again may succeed where err failed (Error.Transient).
func Transient(err error) bool {
	re, ok := errors.AsType[*Error](err)
	return ok && re.Transient
}

func withReason(reason string, err error) error {
	if err == nil {
		return nil
	}
	return &Error{Reason: reason, Err: err}
}

func unsupported(err error) error { return withReason(osmv1alpha1.ReasonUnsupported, err) }

// pluginFailed is a plugin's output the render refuses (an encoder that dropped a placeholder); the same
// inputs may render later, as after any failed plugin call.
func pluginFailed(err error) error {
	return &Error{Reason: osmv1alpha1.ReasonPluginFailed, Err: err, Transient: true}
}
