package cron

import (
	"fmt"
	"sort"
	"testing"
	"time"

	robfig "github.com/robfig/cron/v3"
)

// referenceSpecs are the schedules that TestNextAgainstReference checks:
// fixed hours and minutes, hour *, days of the week and of the month,
// shorthands and steps, at times that the zones' changes of clocks hit.
var referenceSpecs = []string{
	"0 9 * * *", "30 2 * * *", "45 1 * * *", "0 0 * * *", "30 23 * * *", "45 2 * * *",
	"30 * * * *", "0 * * * *", "*/15 * * * *", "*/20 0-3 * * *",
	"0 12 * * sun", "0 12 * * fri", "0 0 * * fri", "0 * * * sun", "15 3 1,15 * *", "0 0 29 3 *", "0 12 1 * mon",
	"@hourly", "@daily", "@weekly", "0 */2 * * *", "5 0-3 * * mon-fri",
	// Sunday as 7 (crontab(5)), on the Sundays that clocks change.
	"30 2 * * 7", "0 0 * * 5-7", "15 * * * 1-7/3",
}

// referenceZones have clocks that change at 02:00 (Berlin, New York), at
// midnight (Beirut, Cairo, Havana, Santiago), by 30 minutes (Lord Howe),
// at 02:45 (Chatham), or never (Kolkata, UTC).
var referenceZones = []string{
	"Europe/Berlin", "America/New_York", "Asia/Beirut", "Africa/Cairo", "Australia/Lord_Howe",
	"America/Santiago", "America/Havana", "Pacific/Chatham", "Asia/Kolkata", "UTC",
}

// TestNextAgainstReference compares Next, from every tick and from just
// before it, with the ticks found minute by minute over 2026 (and, past
// the zones' tables of transitions, over 2040, a leap year) by
// referenceTicks.
func TestNextAgainstReference(t *testing.T) {
	years := []struct {
		year  int
		zones []string
	}{
		{2026, referenceZones},
		{2040, []string{"Europe/Berlin", "Australia/Lord_Howe", "America/Santiago"}},
	}
	for _, y := range years {
		for _, zone := range y.zones {
			t.Run(fmt.Sprint(zone, " ", y.year), func(t *testing.T) {
				t.Parallel()
				checkZoneYear(t, zone, y.year)
			})
		}
	}
}

// checkZoneYear checks every reference spec in zone over the year.
func checkZoneYear(t *testing.T, zone string, year int) {
	var scheds []*Schedule
	for _, spec := range referenceSpecs {
		scheds = append(scheds, MustParse("CRON_TZ="+zone+" "+spec))
	}
	from := time.Date(year, time.January, 1, 0, 0, 0, 0, time.UTC)
	to := from.AddDate(1, 0, 0)
	// Some days of history before from, for the wall times already seen,
	// and after to, for the ticks after the year's last ones.
	all := referenceTicks(scheds, from.AddDate(0, 0, -10), to.AddDate(0, 0, 10))
	for i, s := range scheds {
		if err := checkTicks(s, all[i], from, to); err != nil {
			t.Error(err)
		}
	}
}

// checkTicks checks Next against the reference ticks ref from each tick in
// [from, to) and from a second before it; it returns the first mismatch.
func checkTicks(s *Schedule, ref []time.Time, from, to time.Time) error {
	first := sort.Search(len(ref), func(i int) bool { return !ref[i].Before(from) })
	for j := first; j < len(ref)-1 && ref[j].Before(to); j++ {
		if got := s.Next(ref[j].Add(-time.Second)); !got.Equal(ref[j]) {
			return fmt.Errorf("%q: Next(%s) = %s, want %s", s, rfc(ref[j].Add(-time.Second)), rfc(got), rfc(ref[j]))
		}
		if got := s.Next(ref[j]); !got.Equal(ref[j+1]) {
			return fmt.Errorf("%q: Next(%s) = %s, want %s", s, rfc(ref[j]), rfc(got), rfc(ref[j+1]))
		}
	}
	return nil
}

// referenceTicks returns the ticks of each schedule in [from, to), found
// by reading the wall clock minute by minute, as the package documents
// them: a matching wall time ticks; one that the clocks skipped ticks at
// the change for a fixed-hour job; a wall time seen before (clocks went
// back) ticks again only for a job whose hour is *.
func referenceTicks(scheds []*Schedule, from, to time.Time) [][]time.Time {
	out := make([][]time.Time, len(scheds))
	loc := scheds[0].loc
	prev := wallAt(from.Add(-time.Minute), loc)
	latestWall := prev
	for u := from; u.Before(to); u = u.Add(time.Minute) {
		w := wallAt(u, loc)
		f := fieldsOf(w)
		for i, s := range scheds {
			tick := f.match(s.wall) && (!s.fixedHour || w.After(latestWall))
			for x := prev.Add(time.Minute); s.fixedHour && x.Before(w); x = x.Add(time.Minute) {
				tick = tick || fieldsOf(x).match(s.wall) // skipped: runs at the change
			}
			if tick {
				out[i] = append(out[i], u)
			}
		}
		prev, latestWall = w, latest(latestWall, w)
	}
	return out
}

// wallAt returns the wall clock of u in loc, read as UTC.
func wallAt(u time.Time, loc *time.Location) time.Time {
	_, off := u.In(loc).Zone()
	return u.UTC().Add(time.Duration(off) * time.Second)
}

// wallFields are the fields of a wall time that cron reads.
type wallFields struct{ minute, hour, dom, month, dow int }

// fieldsOf returns the fields of the wall time w (read as UTC).
func fieldsOf(w time.Time) wallFields {
	_, month, day := w.Date()
	hour, minute, _ := w.Clock()
	return wallFields{minute: minute, hour: hour, dom: day, month: int(month), dow: int(w.Weekday())}
}

// match reports whether spec's fields match f, day of month or day of week
// as cron has it: both must match when either is *, else one.
func (f wallFields) match(spec *robfig.SpecSchedule) bool {
	const starBit = 1 << 63
	has := func(set uint64, v int) bool { return set&(1<<uint(v)) != 0 }
	if !has(spec.Minute, f.minute) || !has(spec.Hour, f.hour) || !has(spec.Month, f.month) {
		return false
	}
	dom, dow := has(spec.Dom, f.dom), has(spec.Dow, f.dow)
	if spec.Dom&starBit != 0 || spec.Dow&starBit != 0 {
		return dom && dow
	}
	return dom || dow
}

// rfc formats t for a test's message.
func rfc(t time.Time) string { return t.UTC().Format(time.RFC3339) }
