package runtime_test

import (
	"context"
	"testing"
	"time"

	"github.com/osmhq/osm/sdk/runtime"
)

// TestSessionsShareAnInstanceOnlyWithinOneMachineDeployment: the calls of one session run on one instance (the
// second render sees the first), a new session starts from the module's snapshot, and the instance's memory is
// reserved until Close.
func TestSessionsShareAnInstanceOnlyWithinOneMachineDeployment(t *testing.T) {
	rt := newRuntime(t, runtime.Config{})
	m := load(t, rt, "healthy")
	instanceFile := func(s *runtime.Session, md string) string {
		t.Helper()
		req := renderRequest()
		req.Context.MachineDeployment.Name = md
		resp, err := s.Render(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		return resp.Config.File("/etc/osm/instance").Content.Inline.Data
	}
	for _, md := range []string{"team-a", "team-b"} {
		s, err := m.Session(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if now, _ := runtime.MemoryReserved(rt); now != runtime.CallMemory(rt) {
			t.Errorf("an open session reserves %d bytes, want one call's %d", now, runtime.CallMemory(rt))
		}
		if got := instanceFile(s, md); got != pristine {
			t.Errorf("the first render of %s's session saw an earlier call: %s, want the snapshot's %s", md, got, pristine)
		}
		if got, want := instanceFile(s, md), `renders=3 previous="`+md+`"`; got != want {
			t.Errorf("the second render of %s's session = %s, want %s (one instance per session)", md, got, want)
		}
		s.Close()
		s.Close()
		if now, _ := runtime.MemoryReserved(rt); now != 0 {
			t.Errorf("%d bytes still reserved after Close", now)
		}
	}
}

// TestSessionRecoversFromAFailedCall: a call that times out discards the session's instance; the next call runs
// on a fresh one within the same reservation.
func TestSessionRecoversFromAFailedCall(t *testing.T) {
	rt := newRuntime(t, runtime.Config{Timeout: 2 * time.Second})
	loop := load(t, rt, "loop")
	s, err := loop.Session(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for range 2 {
		_, err := s.Render(context.Background(), renderRequest())
		if runtime.ReasonOf(err) != runtime.ReasonTimeout {
			t.Fatalf("render of an endless loop in a session: %v, want a timeout", err)
		}
	}
	if now, _ := runtime.MemoryReserved(rt); now != runtime.CallMemory(rt) {
		t.Errorf("a session holds %d bytes after failed calls, want one call's %d", now, runtime.CallMemory(rt))
	}
}
