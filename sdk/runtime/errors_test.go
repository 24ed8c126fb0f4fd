package runtime

import (
	"context"
	"errors"
	"fmt"
	"testing"
)

func TestErrorMessage(t *testing.T) {
	digest := "sha256:1234abcd5678ef901234abcd5678ef901234abcd5678ef901234abcd5678ef90"
	tests := []struct {
		name string
		err  *Error
		want string
	}{
		{name: "timeout", err: &Error{Plugin: "ubuntu", Digest: digest, Export: "osm_render", Reason: ReasonTimeout, Detail: "timed out after 5s"},
			want: `plugin "ubuntu" (sha256:1234abcd5678…) osm_render: timed out after 5s`},
		{name: "trap with output", err: &Error{Plugin: "x", Export: "osm_render", Reason: ReasonPanic, Detail: "guest runtime crashed: exit_code(2)",
			Stderr: "panic: boom\n\ngoroutine 1 [running]:\nmain.main()\n"},
			want: `plugin "x" osm_render: guest runtime crashed: exit_code(2); guest output: panic: boom | goroutine 1 [running]: | main.main()`},
		{name: "plugin error hides output", err: &Error{Plugin: "x", Export: "osm_render", Reason: ReasonPluginError, Detail: "bad\nconfig", Stderr: "noise"},
			want: `plugin "x" osm_render: bad | config`},
		{name: "no detail", err: &Error{Plugin: "x", Reason: ReasonClosed}, want: `plugin "x": Closed`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.err.Error(); got != tt.want {
				t.Errorf("Error() =\n%s\nwant\n%s", got, tt.want)
			}
		})
	}
}

func TestErrorIs(t *testing.T) {
	err := fmt.Errorf("rendering: %w", &Error{Plugin: "ubuntu", Export: "osm_render", Reason: ReasonTimeout, Err: context.DeadlineExceeded})
	tests := []struct {
		target error
		want   bool
	}{
		{ErrTimeout, true},
		{&Error{Reason: ReasonTimeout, Plugin: "ubuntu"}, true},
		{&Error{Reason: ReasonTimeout, Plugin: "flatcar"}, false},
		{ErrPanic, false},
		{context.DeadlineExceeded, true},
	}
	for _, tt := range tests {
		if got := errors.Is(err, tt.target); got != tt.want {
			t.Errorf("errors.Is(err, %v) = %v, want %v", tt.target, got, tt.want)
		}
	}
	if ReasonOf(err) != ReasonTimeout || ReasonOf(errors.New("x")) != "" {
		t.Error("ReasonOf is wrong")
	}
}

func TestCaptureBounds(t *testing.T) {
	c := newCapture(8)
	c.Write([]byte("12345"))
	c.Write([]byte("6789ab"))
	s, truncated := c.take()
	if s != "12345678" || !truncated {
		t.Errorf("take() = %q, %v; want the first 8 bytes and truncated", s, truncated)
	}
	if s, truncated := c.take(); s != "" || truncated {
		t.Errorf("take() after take() = %q, %v", s, truncated)
	}
}
