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
	var re *Error
	if errors.As(err, &re) {
		return re.Reason
	}
	return osmv1alpha1.ReasonRenderFailed
}

// Transient reports whether rendering the same inputs again may succeed where err failed (Error.Transient).
func Transient(err error) bool {
	var re *Error
	return errors.As(err, &re) && re.Transient
}

func withReason(reason string, err error) error {
	if err == nil {
		return nil
	}
	return &Error{Reason: reason, Err: err}
}

func unsupported(err error) error { return withReason(osmv1alpha1.ReasonUnsupported, err) }

// pluginFailed is a plugin call that failed; it may not fail again.
func pluginFailed(err error) error {
	return &Error{Reason: osmv1alpha1.ReasonPluginFailed, Err: err, Transient: true}
}

// fromSource is a PluginSource's failure as the pipeline reports it. Sources (host/pluginsource, osmctl) name
// what failed by its reason only: a load that failed (PluginFailed) or a pull that failed (PluginPullFailed) may
// pass; a plugin that does not exist or is not one will not. An error without a reason is a plugin that was
// not found.
func fromSource(err error) error {
	var re *Error
	switch {
	case !errors.As(err, &re):
		return withReason(osmv1alpha1.ReasonPluginNotFound, err)
	case !re.Transient && (re.Reason == osmv1alpha1.ReasonPluginFailed || re.Reason == osmv1alpha1.ReasonPluginPullFailed):
		return &Error{Reason: re.Reason, Err: err, Transient: true}
	default:
		return err
	}
}
