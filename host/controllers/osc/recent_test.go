package osc

import (
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

func TestRecentWritesForgetAfterTheWindow(t *testing.T) {
	now := time.Unix(1000, 0)
	w := &recentWrites{now: func() time.Time { return now }}
	w.note("a")
	if !w.wrote("a") || w.wrote("b") {
		t.Fatalf("just noted: a %v, b %v; want true, false", w.wrote("a"), w.wrote("b"))
	}
	now = now.Add(recentWindow - time.Second)
	if !w.wrote("a") {
		t.Errorf("forgotten within the window")
	}
	now = now.Add(time.Second)
	if w.wrote("a") {
		t.Errorf("remembered after the window")
	}
	// Old entries are pruned once the map is large, so it holds about one window's writes.
	for i := range 2000 {
		w.note(types.UID(fmt.Sprint(i)))
	}
	now = now.Add(recentWindow)
	w.note("late")
	if n := len(w.at); n != 1 {
		t.Errorf("%d entries after everything but the last expired, want 1", n)
	}
}
