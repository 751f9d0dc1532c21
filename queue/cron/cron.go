// Package cron parses the schedules of periodic jobs (queue.Periodic):
// 5-field cron expressions, the @hourly-style shorthands and @every DUR,
// in UTC unless a time zone is given. Its Schedule satisfies
// queue.Schedule.
//
// The fields are minute, hour, day of month, month and day of week, with
// the usual *, lists (1,15), ranges (1-5), steps (*/10) and names (jan,
// mon). The shorthands are @yearly (@annually), @monthly, @weekly, @daily
// (@midnight) and @hourly. A time zone is given as a prefix, as in
// "CRON_TZ=Europe/Paris 0 3 * * *" (or TZ=), or with ParseIn.
//
// The fields are parsed by github.com/robfig/cron/v3's parser, the
// de-facto standard one in Go; this package adds what a queue needs on top:
//   - UTC by default (robfig uses the process's local zone);
//   - @every DUR ticks at whole multiples of DUR since the Unix epoch
//     (robfig counts from whenever it was asked), so that every process,
//     and a new leader after a restart, computes the same ticks;
//   - daylight saving time handled like cron does for a job at a fixed
//     hour: a time skipped when clocks go forward runs at the moment of the
//     change, and a time repeated when they go back runs once, the first
//     time. Jobs whose hour field is * run by elapsed time: every matching
//     minute that exists, both passes of a repeated hour included.
package cron

import (
	"errors"
	"fmt"
	"strings"
	"time"

	robfig "github.com/robfig/cron/v3"
)

// ErrInvalidSchedule is wrapped by every error of Parse and ParseIn.
var ErrInvalidSchedule = errors.New("jobqueue/cron: invalid schedule")

// Schedule is a parsed schedule. Its Next gives the ticks.
type Schedule struct {
	spec string
	loc  *time.Location
	// every is set for @every DUR; else spec holds the cron fields.
	every time.Duration
	cron  *robfig.SpecSchedule
	// wall is cron evaluated on wall-clock times (UTC, no transitions),
	// to find ticks in the times that daylight saving time skips.
	wall *robfig.SpecSchedule
	// fixedHour: the hour field is not *, so the tick is at a wall time
	// (DST rules apply).
	fixedHour bool
}

var parser = robfig.NewParser(robfig.Minute | robfig.Hour | robfig.Dom | robfig.Month | robfig.Dow | robfig.Descriptor)

// Parse parses spec, in UTC unless it starts with CRON_TZ=ZONE or TZ=ZONE
// (an IANA zone name such as Europe/Paris) and a space.
func Parse(spec string) (*Schedule, error) {
	text := strings.TrimSpace(spec)
	loc := time.UTC
	if rest, ok := cutAny(text, "CRON_TZ=", "TZ="); ok {
		zone, fields, found := strings.Cut(rest, " ")
		if !found || strings.TrimSpace(fields) == "" {
			return nil, fmt.Errorf("%w: %q: a time zone prefix must be followed by a space and the schedule, as in \"CRON_TZ=Europe/Paris 0 3 * * *\"", ErrInvalidSchedule, spec)
		}
		l, err := loadZone(zone)
		if err != nil {
			return nil, fmt.Errorf("%w: %q: %v", ErrInvalidSchedule, spec, err)
		}
		loc, text = l, strings.TrimSpace(fields)
	}
	return parseIn(spec, text, loc)
}

// ParseIn parses spec (without a time zone prefix) in the time zone loc.
func ParseIn(spec string, loc *time.Location) (*Schedule, error) {
	if loc == nil {
		return nil, fmt.Errorf("%w: %q: the time zone is nil", ErrInvalidSchedule, spec)
	}
	text := strings.TrimSpace(spec)
	if _, ok := cutAny(text, "CRON_TZ=", "TZ="); ok {
		return nil, fmt.Errorf("%w: %q: give the time zone either as a prefix (Parse) or as ParseIn's location, not both", ErrInvalidSchedule, spec)
	}
	return parseIn(spec, text, loc)
}

// MustParse is Parse that panics on an invalid schedule, for schedules
// written in the program.
func MustParse(spec string) *Schedule {
	s, err := Parse(spec)
	if err != nil {
		panic(err)
	}
	return s
}

func cutAny(s string, prefixes ...string) (string, bool) {
	for _, p := range prefixes {
		if rest, ok := strings.CutPrefix(s, p); ok {
			return rest, true
		}
	}
	return s, false
}

// loadZone loads an IANA time zone; "Local" (which would depend on the
// machine) is refused.
func loadZone(name string) (*time.Location, error) {
	if name == "" || name == "Local" {
		return nil, fmt.Errorf("time zone %q: name an IANA zone such as Europe/Paris (or UTC)", name)
	}
	l, err := time.LoadLocation(name)
	if err != nil {
		return nil, fmt.Errorf("unknown time zone %q (want an IANA name such as Europe/Paris): %v", name, err)
	}
	return l, nil
}

// minEvery is the shortest @every: times are kept to the second on MySQL.
const minEvery = time.Second

func parseIn(orig, text string, loc *time.Location) (*Schedule, error) {
	if text == "" {
		return nil, fmt.Errorf("%w: %q is empty; want 5 cron fields (minute hour day-of-month month day-of-week), @hourly, @daily, @weekly, @monthly or @every DUR", ErrInvalidSchedule, orig)
	}
	if d, ok := strings.CutPrefix(text, "@every "); ok {
		every, err := time.ParseDuration(strings.TrimSpace(d))
		if err != nil {
			return nil, fmt.Errorf("%w: %q: %v", ErrInvalidSchedule, orig, err)
		}
		if every < minEvery || every%time.Second != 0 {
			return nil, fmt.Errorf("%w: %q: @every takes a whole number of seconds, at least 1s", ErrInvalidSchedule, orig)
		}
		return &Schedule{spec: orig, loc: loc, every: every}, nil
	}
	if strings.HasPrefix(text, "@") || len(strings.Fields(text)) == 5 {
		parsed, err := parser.Parse(text)
		if err != nil {
			return nil, fmt.Errorf("%w: %q: %v", ErrInvalidSchedule, orig, err)
		}
		spec, ok := parsed.(*robfig.SpecSchedule)
		if !ok {
			return nil, fmt.Errorf("%w: %q: unsupported schedule", ErrInvalidSchedule, orig)
		}
		in, wall := *spec, *spec
		in.Location, wall.Location = loc, time.UTC
		const starBit = 1 << 63
		s := &Schedule{spec: orig, loc: loc, cron: &in, wall: &wall, fixedHour: spec.Hour&starBit == 0}
		if s.Next(time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)).IsZero() {
			return nil, fmt.Errorf("%w: %q never matches a date", ErrInvalidSchedule, orig)
		}
		return s, nil
	}
	return nil, fmt.Errorf("%w: %q has %d fields; want 5 (minute hour day-of-month month day-of-week), @hourly, @daily, @weekly, @monthly or @every DUR", ErrInvalidSchedule, orig, len(strings.Fields(text)))
}

// String is the schedule as it was given.
func (s *Schedule) String() string { return s.spec }

// Location is the schedule's time zone (UTC unless one was given).
func (s *Schedule) Location() *time.Location { return s.loc }

// Next returns the first tick strictly after t, in UTC, or the zero time
// when there is none (a date that never comes, such as 30 February).
func (s *Schedule) Next(t time.Time) time.Time {
	if s.every > 0 {
		// Whole multiples of every since the Unix epoch, counted in
		// seconds: every is whole seconds, and nanoseconds since the epoch
		// overflow int64 outside 1678-2262 (an @every of centuries reaches
		// past that).
		d := int64(s.every / time.Second)
		sec := t.Unix() // floored: t is in [sec, sec+1)
		q := sec / d
		if sec%d != 0 && sec < 0 {
			q-- // round towards the past, not towards zero
		}
		return time.Unix((q+1)*d, 0).UTC()
	}
	t = t.In(s.loc)
	for range 1000 {
		n := s.cron.Next(t)
		if n.IsZero() {
			return n
		}
		if !s.fixedHour {
			return n.UTC()
		}
		if g := s.skippedTick(t, n); !g.IsZero() {
			return g.UTC()
		}
		if repeated(n) {
			t = n // its wall time came already, an hour (or so) before
			continue
		}
		return n.UTC()
	}
	return time.Time{}
}

// skippedTick returns the first moment in (t, n) at which clocks went
// forward over a wall time that the schedule matches (that tick runs at
// the change), or the zero time.
func (s *Schedule) skippedTick(t, n time.Time) time.Time {
	cur := t
	for range 100 {
		_, end := cur.ZoneBounds()
		if end.IsZero() || !end.Before(n) {
			return time.Time{}
		}
		_, before := end.Add(-time.Nanosecond).Zone()
		_, after := end.Zone()
		if gap := time.Duration(after-before) * time.Second; gap > 0 {
			// The wall times [w0, w0+gap) did not exist; w0 is the wall
			// clock of the change in the zone before it, read as UTC.
			w0 := end.Add(time.Duration(before) * time.Second).UTC()
			if m := s.wall.Next(w0.Add(-time.Second)); !m.IsZero() && m.Before(w0.Add(gap)) {
				return end
			}
		}
		cur = end
	}
	return time.Time{}
}

// repeated reports whether n is in the second pass of wall times that
// clocks going back repeated: the same wall time was an earlier moment.
func repeated(n time.Time) bool {
	start, _ := n.ZoneBounds()
	if start.IsZero() {
		return false
	}
	_, before := start.Add(-time.Nanosecond).Zone()
	_, now := n.Zone()
	back := time.Duration(before-now) * time.Second
	return back > 0 && n.Sub(start) < back
}
