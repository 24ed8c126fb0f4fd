package parallel

import (
	"errors"
	"sync/atomic"
	"testing"
)

func TestDoRunsAllAndJoinsErrors(t *testing.T) {
	var ran atomic.Int32
	errA, errB := errors.New("a"), errors.New("b")
	err := Do(
		func() error { ran.Add(1); return errA },
		func() error { ran.Add(1); return nil },
		func() error { ran.Add(1); return errB },
	)
	if ran.Load() != 3 {
		t.Errorf("ran %d of 3", ran.Load())
	}
	if !errors.Is(err, errA) || !errors.Is(err, errB) {
		t.Errorf("err = %v, want both errors", err)
	}
	if err := Do(func() error { return nil }, func() error { return nil }); err != nil {
		t.Errorf("err = %v", err)
	}
}

// TestDoOverlaps checks that the functions really run at once: each waits for the other to start.
func TestDoOverlaps(t *testing.T) {
	a, b := make(chan struct{}), make(chan struct{})
	err := Do(
		func() error { close(a); <-b; return nil },
		func() error { close(b); <-a; return nil },
	)
	if err != nil {
		t.Fatal(err)
	}
}
