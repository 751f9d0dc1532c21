// Package cron parses the schedules of periodic jobs (queue.Periodic):
// 5-field cron expressions, the @hourly-style shorthands and @every DUR,
// in UTC unless a time zone is given. Its Schedule satisfies
// queue.Schedule.
//
// The fields are minute, hour, day of month, month and day of week, with
// the usual *, lists (1,15), ranges (1-5), steps (*/10) and names (jan,
// mon). Sunday is 0 or 7 (as in crontab(5): 5-7 is Friday to Sunday). A
// list with an empty item ("1,,2", "1,") is refused, naming its field. The shorthands are @yearly (@annually), @monthly, @weekly, @daily
// (@midnight) and @hourly. A time zone is given as a prefix, as in
// "CRON_TZ=Europe/Paris 0 3 * * *" (or TZ=), or with ParseIn. Zones are
// read by time.LoadLocation, from $ZONEINFO or the system's zoneinfo; a
// program that may run without one (a minimal container image) imports
// _ "time/tzdata" in its main package to embed a copy (this package does
// not, to leave that choice to the program).
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
//     minute that exists, both passes of a repeated hour included;
//   - ticks found on the zone's wall clock, one span between two changes of
//     its clocks at a time, rather than by robfig's Next, which skips days
//     or invents ticks where clocks change at midnight (Asia/Beirut) or by
//     30 minutes (Australia/Lord_Howe), and gives up on dates more than
//     five years apart (29 February from 2096 to 2104).
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
	// wall is the cron fields evaluated on wall-clock times read as UTC
	// (no transitions); Next turns them into instants in loc.
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
	if fields := strings.Fields(text); fields[0] == "@every" {
		every, err := parseEvery(fields[1:])
		if err != nil {
			return nil, fmt.Errorf("%w: %q: %v", ErrInvalidSchedule, orig, err)
		}
		return &Schedule{spec: orig, loc: loc, every: every}, nil
	}
	if strings.HasPrefix(text, "@") || len(strings.Fields(text)) == 5 {
		if !strings.HasPrefix(text, "@") {
			checked, err := checkFields(text)
			if err != nil {
				return nil, fmt.Errorf("%w: %q: %v", ErrInvalidSchedule, orig, err)
			}
			text = checked
		}
		parsed, err := parser.Parse(text)
		if err != nil {
			return nil, fmt.Errorf("%w: %q: %v", ErrInvalidSchedule, orig, err)
		}
		spec, ok := parsed.(*robfig.SpecSchedule)
		if !ok {
			return nil, fmt.Errorf("%w: %q: unsupported schedule", ErrInvalidSchedule, orig)
		}
		wall := *spec
		wall.Location = time.UTC
		const starBit = 1 << 63
		s := &Schedule{spec: orig, loc: loc, wall: &wall, fixedHour: spec.Hour&starBit == 0}
		if s.Next(time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)).IsZero() {
			return nil, fmt.Errorf("%w: %q never matches a date", ErrInvalidSchedule, orig)
		}
		return s, nil
	}
	return nil, fmt.Errorf("%w: %q has %d fields; want 5 (minute hour day-of-month month day-of-week), @hourly, @daily, @weekly, @monthly or @every DUR", ErrInvalidSchedule, orig, len(strings.Fields(text)))
}

// parseEvery parses the words after @every: one duration, a whole number
// of seconds, at least minEvery. Each error says what to write instead.
func parseEvery(words []string) (time.Duration, error) {
	const want = "@every takes one duration, a whole number of seconds, at least 1s, as in @every 5m or @every 90s"
	if len(words) != 1 {
		return 0, fmt.Errorf("%s (got %d words after @every)", want, len(words))
	}
	every, err := time.ParseDuration(words[0])
	if err != nil {
		return 0, fmt.Errorf("%s: %v", want, err)
	}
	if every < minEvery || every%time.Second != 0 {
		return 0, fmt.Errorf("%s (got %v)", want, every)
	}
	return every, nil
}

// String is the schedule as it was given.
func (s *Schedule) String() string { return s.spec }

// Location is the schedule's time zone (UTC unless one was given).
func (s *Schedule) Location() *time.Location { return s.loc }

// Next returns the first tick strictly after t, in UTC, or the zero time
// when there is none. Parse refuses a schedule that never matches a date
// (such as 30 February), so a parsed schedule has a next tick for any t
// short of the end of time.
func (s *Schedule) Next(t time.Time) time.Time {
	if s.every > 0 {
		return s.nextEvery(t)
	}
	return s.nextCron(t)
}

// nextEvery is Next for @every: whole multiples of every since the Unix
// epoch, counted in seconds (every is whole seconds, and nanoseconds since
// the epoch overflow int64 outside 1678-2262, which an @every of centuries
// reaches past).
func (s *Schedule) nextEvery(t time.Time) time.Time {
	d := int64(s.every / time.Second)
	sec := t.Unix() // floored: t is in [sec, sec+1)
	q := sec / d
	if sec%d != 0 && sec < 0 {
		q-- // round towards the past, not towards zero
	}
	return time.Unix((q+1)*d, 0).UTC()
}

// maxPeriods bounds the periods of a zone that nextCron walks through
// before it gives up (no tick): a tick comes within 8 years (29 February
// skips 2100), and zones change their clocks a few times a year.
const maxPeriods = 1000

// nextCron is Next for cron fields. It walks the zone's periods (the spans
// in which its UTC offset stays the same) from t on. Within a period the
// wall clock is the instant plus the offset, so the period's ticks are the
// wall times in it that the fields match, found by s.wall, which reads
// wall times as UTC and knows no transitions. Between two periods the DST
// rules apply: for a fixed-hour job, wall times that clocks going forward
// skip run at the change, and wall times that clocks going back repeat run
// in the first pass only; a job whose hour is * runs at every matching
// wall time that exists, in both passes.
func (s *Schedule) nextCron(t time.Time) time.Time {
	p := periodAt(t.In(s.loc))
	after := t.UTC().Add(p.offset) // ticks are at wall times later than this
	for range maxPeriods {
		if r := p.repeatedUntil(); s.fixedHour && !r.IsZero() {
			after = latest(after, r.Add(-time.Nanosecond))
		}
		m := nextWall(s.wall, after)
		if m.IsZero() {
			return time.Time{}
		}
		if tick := m.Add(-p.offset); p.end.IsZero() || tick.Before(p.end) {
			return tick.UTC()
		}
		next := periodAt(p.end)
		if s.fixedHour && m.Before(p.end.UTC().Add(next.offset)) {
			// m is in the wall times [end+offset, end+next.offset) that
			// the clocks skipped at the end of p: it runs at the change.
			return p.end.UTC()
		}
		// The ticks left are at wall times from the end of p on (next may
		// start before it, see periodAt).
		p, after = next, p.end.UTC().Add(next.offset-time.Nanosecond)
	}
	return time.Time{}
}

// period is a span of time in which a zone keeps one UTC offset.
type period struct {
	// start and end bound the period, [start, end); zero when unbounded.
	start, end time.Time
	// offset is the wall clock minus UTC in the period; before, the same
	// in the period before it (offset when start is zero).
	offset, before time.Duration
}

// periodAt returns the period of t's zone that t is in. Its bounds may
// also be the start of a year with no change of offset there, which does
// no harm.
func periodAt(t time.Time) period {
	start, end := t.ZoneBounds()
	if !end.IsZero() && !end.After(t) {
		// Past a zone's table of transitions, Go's ZoneBounds (Go 1.26)
		// ends the last period of a leap year on 31 December at 00:00 UTC,
		// a year of 365 days, even for a t after that (TestNextAcrossTransitions
		// has such rows). The offset lasts until the next year in UTC begins, where
		// the zone's rule is applied afresh.
		end = time.Date(t.UTC().Year()+1, time.January, 1, 0, 0, 0, 0, time.UTC).In(t.Location())
	}
	_, off := t.Zone()
	p := period{start: start, end: end, offset: seconds(off), before: seconds(off)}
	if !start.IsZero() {
		_, before := start.Add(-time.Nanosecond).Zone()
		p.before = seconds(before)
	}
	return p
}

// repeatedUntil returns the end of the wall times (read as UTC) that the
// period repeats from the one before, when clocks went back at its start:
// those wall times came already, in the first pass. It is the zero time
// when the period repeats none.
func (p period) repeatedUntil() time.Time {
	if p.start.IsZero() || p.before <= p.offset {
		return time.Time{}
	}
	return p.start.UTC().Add(p.before)
}

// nextWall returns the first wall time later than w (both read as UTC)
// that spec matches, or the zero time when there is none within ten years,
// which means never: a date that exists comes back within 8 years (29
// February, across 2100). robfig's Next gives up after five years, so it
// is asked a second time from where the first search ended.
func nextWall(spec *robfig.SpecSchedule, w time.Time) time.Time {
	if m := spec.Next(w); !m.IsZero() {
		return m
	}
	// None up to the end of the year w.Year()+5, so none until w+5 years.
	return spec.Next(w.AddDate(5, 0, 0))
}

// seconds turns a zone offset in seconds into a Duration.
func seconds(off int) time.Duration { return time.Duration(off) * time.Second }

// latest returns the later of a and b.
func latest(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
