package rollout

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Window is a weekly maintenance window, written "[DAYS] HH:MM-HH:MM [ZONE]": DAYS a comma-separated list of
// days or day ranges (Mon-Fri, Sat,Sun; every day when absent), ZONE UTC (the default) or an IANA name
// (Europe/Berlin). A window whose end is not after its start ends the next day ("Fri 22:00-02:00" is open
// from Friday 22:00 to Saturday 02:00). A rollout only starts inside the window; one under way goes on.
type Window struct {
	days       [7]bool
	start, end int // minutes after midnight
	loc        *time.Location
	text       string
}

var dayNames = map[string]time.Weekday{"sun": time.Sunday, "mon": time.Monday, "tue": time.Tuesday, "wed": time.Wednesday,
	"thu": time.Thursday, "fri": time.Friday, "sat": time.Saturday}

// ParseWindow parses a window; the empty string is no window (always open, nil).
func ParseWindow(s string) (*Window, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, nil
	}
	w := &Window{loc: time.UTC, text: s}
	fields := strings.Fields(s)
	i := 0
	if len(fields) > 0 && !strings.Contains(fields[0], ":") {
		if err := w.parseDays(fields[0]); err != nil {
			return nil, fmt.Errorf("rollout window %q: %w", s, err)
		}
		i++
	} else {
		for d := range w.days {
			w.days[d] = true
		}
	}
	if i >= len(fields) {
		return nil, fmt.Errorf("rollout window %q: want [DAYS] HH:MM-HH:MM [ZONE], e.g. \"Sat 02:00-06:00 UTC\"", s)
	}
	from, to, ok := strings.Cut(fields[i], "-")
	var err error
	if !ok {
		return nil, fmt.Errorf("rollout window %q: want a time range HH:MM-HH:MM", s)
	}
	if w.start, err = clock(from); err == nil {
		w.end, err = clock(to)
	}
	if err != nil {
		return nil, fmt.Errorf("rollout window %q: %w", s, err)
	}
	i++
	if i < len(fields) {
		if w.loc, err = time.LoadLocation(fields[i]); err != nil {
			return nil, fmt.Errorf("rollout window %q: time zone: %w", s, err)
		}
		i++
	}
	if i != len(fields) {
		return nil, fmt.Errorf("rollout window %q: unexpected %q", s, strings.Join(fields[i:], " "))
	}
	return w, nil
}

func (w *Window) parseDays(s string) error {
	for _, part := range strings.Split(strings.ToLower(s), ",") {
		from, to, isRange := strings.Cut(part, "-")
		a, ok := dayNames[from]
		if !ok {
			return fmt.Errorf("unknown day %q (Mon, Tue, Wed, Thu, Fri, Sat, Sun)", from)
		}
		b := a
		if isRange {
			if b, ok = dayNames[to]; !ok {
				return fmt.Errorf("unknown day %q (Mon, Tue, Wed, Thu, Fri, Sat, Sun)", to)
			}
		}
		for d := a; ; d = (d + 1) % 7 {
			w.days[d] = true
			if d == b {
				break
			}
		}
	}
	return nil
}

func clock(s string) (int, error) {
	h, m, ok := strings.Cut(s, ":")
	hh, err1 := strconv.Atoi(h)
	mm, err2 := strconv.Atoi(m)
	if !ok || err1 != nil || err2 != nil || hh < 0 || hh > 24 || mm < 0 || mm > 59 || (hh == 24 && mm != 0) {
		return 0, fmt.Errorf("%q is not a time of day HH:MM", s)
	}
	return hh*60 + mm, nil
}

func (w *Window) String() string {
	if w == nil {
		return "always"
	}
	return w.text
}

// Open reports whether t is inside the window. No window is always open.
func (w *Window) Open(t time.Time) bool {
	if w == nil {
		return true
	}
	t = t.In(w.loc)
	m, wd := t.Hour()*60+t.Minute(), t.Weekday()
	if w.start < w.end {
		return w.days[wd] && m >= w.start && m < w.end
	}
	return (w.days[wd] && m >= w.start) || (w.days[(wd+6)%7] && m < w.end)
}

// NextOpen is the next time the window opens after t (t itself when it is open).
func (w *Window) NextOpen(t time.Time) time.Time {
	if w.Open(t) {
		return t
	}
	lt := t.In(w.loc)
	midnight := time.Date(lt.Year(), lt.Month(), lt.Day(), 0, 0, 0, 0, w.loc)
	for i := 0; i <= 7; i++ {
		day := midnight.AddDate(0, 0, i)
		start := day.Add(time.Duration(w.start) * time.Minute)
		if w.days[day.Weekday()] && start.After(t) {
			return start
		}
	}
	return t.Add(24 * time.Hour)
}
