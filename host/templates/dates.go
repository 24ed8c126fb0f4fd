package templates

import (
	"errors"
	"fmt"
	"strconv"
	"time"
)

// Hermetic replacements for sprig's date functions. Sprig's format in the process's time zone (time.Local),
// parse in it, read the clock when they are given anything but a time, and load other zones from the host's
// zone database: the same profile would render differently on two controllers, or on two reconciles. These
// take the same arguments, always work in UTC, and refuse what would need the clock or the host.

var errClock = errors.New("needs a time (from toDate) or Unix seconds: profile templates cannot read the clock")

// timeOf converts sprig's date argument: a time, or seconds since the Unix epoch.
func timeOf(v any) (time.Time, error) {
	switch v := v.(type) {
	case time.Time:
		return v.UTC(), nil
	case *time.Time:
		if v == nil {
			return time.Time{}, errClock
		}
		return v.UTC(), nil
	case int64:
		return time.Unix(v, 0).UTC(), nil
	case int:
		return time.Unix(int64(v), 0).UTC(), nil
	case int32:
		return time.Unix(int64(v), 0).UTC(), nil
	}
	return time.Time{}, errClock
}

// zone accepts UTC only. "Local" means UTC: the controller's zone must not show in a node's configuration.
func zone(name string) (*time.Location, error) {
	switch name {
	case "", "UTC", "Local":
		return time.UTC, nil
	}
	return nil, fmt.Errorf("time zone %q: only UTC is available, other zones would depend on the controller host's zone database", name)
}

func date(layout string, v any) (string, error) { return dateInZone(layout, v, "UTC") }

func htmlDate(v any) (string, error) { return dateInZone("2006-01-02", v, "UTC") }

func htmlDateInZone(v any, name string) (string, error) { return dateInZone("2006-01-02", v, name) }

func dateInZone(layout string, v any, name string) (string, error) {
	t, err := timeOf(v)
	if err != nil {
		return "", err
	}
	loc, err := zone(name)
	if err != nil {
		return "", err
	}
	return t.In(loc).Format(layout), nil
}

// toDate parses in UTC; like sprig's, it returns the zero time when str does not parse.
func toDate(layout, str string) time.Time {
	t, _ := time.ParseInLocation(layout, str, time.UTC)
	return t
}

func mustToDate(layout, str string) (time.Time, error) {
	return time.ParseInLocation(layout, str, time.UTC)
}

// durationRound is sprig's, without its time.Time case, which measured the time since then on the clock.
func durationRound(v any) (string, error) {
	var d time.Duration
	switch v := v.(type) {
	case string:
		d, _ = time.ParseDuration(v)
	case int64:
		d = time.Duration(v)
	case time.Time, *time.Time:
		return "", errors.New("durationRound of a time would read the clock; pass a duration")
	}
	u := uint64(d)
	if d < 0 {
		u = -u
	}
	const day = uint64(24 * time.Hour)
	for _, unit := range []struct {
		size   uint64
		suffix string
	}{
		{365 * day, "y"}, {30 * day, "mo"}, {day, "d"},
		{uint64(time.Hour), "h"}, {uint64(time.Minute), "m"}, {uint64(time.Second), "s"},
	} {
		if u > unit.size {
			return strconv.FormatUint(u/unit.size, 10) + unit.suffix, nil
		}
	}
	return "0s", nil
}
