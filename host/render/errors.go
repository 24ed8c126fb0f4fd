package render

import (
	"errors"

	osmv1alpha1 "github.com/osmhq/osm/crds/osm/v1alpha1"
)

// Error is a render failure with the condition reason that describes it (one of the osmv1alpha1.Reason*
// constants), so the controller can set a condition and an event an operator can act on.
type Error struct {
	Reason string
	Err    error
}

func (e *Error) Error() string { return e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// Reason returns the condition reason of err, or ReasonRenderFailed when err carries none.
func Reason(err error) string {
	var re *Error
	if errors.As(err, &re) {
		return re.Reason
	}
	return osmv1alpha1.ReasonRenderFailed
}

func withReason(reason string, err error) error {
	if err == nil {
		return nil
	}
	return &Error{Reason: reason, Err: err}
}

func unsupported(err error) error { return withReason(osmv1alpha1.ReasonUnsupported, err) }
