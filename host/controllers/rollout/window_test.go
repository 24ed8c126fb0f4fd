package rollout

import (
	"testing"
	"time"
)

func TestWindow(t *testing.T) {
	at := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	for _, tc := range []struct {
		window string
		at     string
		open   bool
		next   string
	}{
		{"Sat 02:00-06:00 UTC", "2026-11-28T03:00:00Z", true, "2026-11-28T03:00:00Z"}, // a Saturday
		{"Sat 02:00-06:00 UTC", "2026-11-28T06:00:00Z", false, "2026-12-05T02:00:00Z"},
		{"Sat 02:00-06:00", "2026-11-26T12:00:00Z", false, "2026-11-28T02:00:00Z"},
		{"Fri 22:00-02:00", "2026-11-28T01:30:00Z", true, "2026-11-28T01:30:00Z"},
		{"Fri 22:00-02:00", "2026-11-29T01:30:00Z", false, "2026-12-04T22:00:00Z"},
		{"Mon-Fri 09:00-17:00 Europe/Berlin", "2026-11-27T08:30:00Z", true, "2026-11-27T08:30:00Z"},
		{"Sat,Sun 00:00-24:00", "2026-11-29T23:59:00Z", true, "2026-11-29T23:59:00Z"},
		{"01:00-02:00", "2026-11-29T03:00:00Z", false, "2026-11-30T01:00:00Z"},
	} {
		w, err := ParseWindow(tc.window)
		if err != nil {
			t.Fatalf("%s: %v", tc.window, err)
		}
		if got := w.Open(at(tc.at)); got != tc.open {
			t.Errorf("%s at %s: open = %v, want %v", tc.window, tc.at, got, tc.open)
		}
		if got := w.NextOpen(at(tc.at)); !got.Equal(at(tc.next)) {
			t.Errorf("%s at %s: next open = %s, want %s", tc.window, tc.at, got.UTC().Format(time.RFC3339), tc.next)
		}
	}
	for _, bad := range []string{"Someday 02:00-06:00", "Sat", "Sat 2-6", "Sat 02:00-25:00", "Sat 02:00-06:00 Mars/Base", "Sat 02:00-06:00 UTC extra"} {
		if _, err := ParseWindow(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
	if w, err := ParseWindow(""); err != nil || w != nil || !w.Open(time.Now()) {
		t.Errorf("no window: %v %v", w, err)
	}
}
