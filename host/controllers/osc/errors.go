package osc

import (
	"errors"
	"time"
)

// stallingError is a failure that retrying will not fix: a missing or broken profile, an unsupported
// combination, a plugin that fails deterministically. The reconciler records it and waits for a change to the
// MachineDeployment, the profile or the plugin (all watched) instead of retrying in a hot loop.
type stallingError struct {
	reason string
	err    error
	// retryAfter, when set, retries anyway after a long pause, for failures that may be load-related (a plugin
	// timeout on a busy node).
	retryAfter time.Duration
}

func (e *stallingError) Error() string { return e.err.Error() }
func (e *stallingError) Unwrap() error { return e.err }

func stall(reason string, err error) error { return &stallingError{reason: reason, err: err} }

func isStalling(err error) (*stallingError, bool) {
	var s *stallingError
	ok := errors.As(err, &s)
	return s, ok
}
