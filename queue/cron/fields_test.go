package cron

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestDayOfWeekSeven: 7 is Sunday in the day-of-week field, alone, ending
// a range and with a step, as crontab(5) (Vixie cron, cronie) reads it:
// the field runs from 0 to 7, both Sunday. Before, robfig's parser
// refused 7 (its field ends at 6). want lists the days "0 12 * * FIELD"
// runs in a week from Monday 5 January 2026.
func TestDayOfWeekSeven(t *testing.T) {
	const (
		sun = time.Sunday
		mon = time.Monday
		tue = time.Tuesday
		wed = time.Wednesday
		thu = time.Thursday
		fri = time.Friday
		sat = time.Saturday
	)
	for _, c := range []struct {
		field string
		want  []time.Weekday
	}{
		{"7", []time.Weekday{sun}},
		{"0", []time.Weekday{sun}},
		{"sun", []time.Weekday{sun}},
		{"07", []time.Weekday{sun}},
		{"5-7", []time.Weekday{fri, sat, sun}},
		{"fri-7", []time.Weekday{fri, sat, sun}},
		{"0-7", []time.Weekday{mon, tue, wed, thu, fri, sat, sun}},
		{"1-7", []time.Weekday{mon, tue, wed, thu, fri, sat, sun}},
		{"1-7/2", []time.Weekday{mon, wed, fri, sun}},
		{"0-7/7", []time.Weekday{sun}},
		{"7/2", []time.Weekday{sun}},
		{"7-7", []time.Weekday{sun}},
		{"1,7", []time.Weekday{mon, sun}},
		{"0,7", []time.Weekday{sun}},
		{"mon,5-7/2", []time.Weekday{mon, fri, sun}},
		{"5-7/9223372036854775807", []time.Weekday{fri}}, // no overflow of the day
		{"0-7/8", []time.Weekday{sun}},
		// Unchanged: items without 7.
		{"*/2", []time.Weekday{tue, thu, sat, sun}},
		{"5/1", []time.Weekday{fri, sat}}, // robfig: N/step is N-6/step
	} {
		t.Run(c.field, func(t *testing.T) {
			s, err := Parse("0 12 * * " + c.field)
			if err != nil {
				t.Fatal(err)
			}
			var got []time.Weekday
			from := utc("2026-01-05T00:00:00Z") // a Monday
			for tick := s.Next(from); tick.Before(from.AddDate(0, 0, 7)); tick = s.Next(tick) {
				got = append(got, tick.Weekday())
			}
			if !slices.Equal(got, c.want) {
				t.Errorf("%q runs on %v, want %v", c.field, got, c.want)
			}
		})
	}
}

// TestDayOfWeekSevenWithDayOfMonth: a day of the week given as 7 is not *,
// so a job runs on either day, as with 0 (cron's rule).
func TestDayOfWeekSevenWithDayOfMonth(t *testing.T) {
	seven, err := Parse("0 12 13 * 7")
	if err != nil {
		t.Fatal(err)
	}
	zero, err := Parse("0 12 13 * 0")
	if err != nil {
		t.Fatal(err)
	}
	from := utc("2026-01-01T00:00:00Z")
	got, want := ticks(seven, from, 8), ticks(zero, from, 8)
	if !slices.Equal(got, want) {
		t.Errorf("day 13 or Sunday as 7: %v, as 0: %v", got, want)
	}
}

// TestParseRejectsBadFields: an empty list item ("1,,2", "1,", ",1"),
// which robfig's parser skipped, is refused naming its field, as are a
// day of the week past 7 and a bad step of an item with 7.
func TestParseRejectsBadFields(t *testing.T) {
	for _, c := range []struct{ spec, says string }{
		{"1,,2 * * * *", `the minute field "1,,2" has an empty list item`},
		{"1, * * * *", `the minute field "1," has an empty list item`},
		{",1 * * * *", `the minute field ",1" has an empty list item`},
		{"0 ,3 * * *", `the hour field ",3" has an empty list item`},
		{"0 3 1,,15 * *", `the day-of-month field "1,,15" has an empty list item (a comma at its start or end, or two in a row); remove the extra comma, as in "1,15"`},
		{"0 3 * jan, *", `the month field "jan," has an empty list item`},
		{"0 3 * * mon,,fri", `the day-of-week field "mon,,fri" has an empty list item`},
		{"0 3 * * 7,", `the day-of-week field "7," has an empty list item`},
		{"0 3 * * ,", `the day-of-week field "," has no value, only commas`},
		{"CRON_TZ=Europe/Berlin 0 3 ,,1 * *", `the day-of-month field ",,1" has an empty list item`},
		{"0 3 * * 8", "above maximum"},
		{"0 3 * * 6-8", "above maximum"},
		{"0 3 * * 7-1", "beyond end of range"},
		{"0 3 * * 5-7/0", `the step of "5-7/0" must be a whole number of at least 1`},
		{"0 3 * * 7/x", `the step of "7/x" must be a whole number of at least 1`},
	} {
		t.Run(c.spec, func(t *testing.T) {
			s, err := Parse(c.spec)
			if !errors.Is(err, ErrInvalidSchedule) {
				t.Fatalf("Parse(%q) = %v, %v; want an error wrapping ErrInvalidSchedule", c.spec, s, err)
			}
			if !strings.Contains(err.Error(), c.says) {
				t.Errorf("Parse(%q): %v; want it to say %s", c.spec, err, c.says)
			}
		})
	}
}
