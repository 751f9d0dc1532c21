package cron

import (
	"errors"
	"strings"
	"testing"
	"time"

	_ "time/tzdata" // the tests' zones, whatever the machine has
)

func utc(s string) time.Time {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		panic(err)
	}
	return t.UTC()
}

// ticks returns the n first ticks of s after from, in RFC 3339 UTC.
func ticks(s *Schedule, from time.Time, n int) []string {
	var out []string
	t := from
	for range n {
		t = s.Next(t)
		out = append(out, t.Format(time.RFC3339))
	}
	return out
}

func TestNext(t *testing.T) {
	cases := []struct {
		name, spec, from string
		want             []string
	}{
		{"every five minutes", "*/5 * * * *", "2026-01-01T10:02:00Z",
			[]string{"2026-01-01T10:05:00Z", "2026-01-01T10:10:00Z"}},
		{"a tick is strictly after", "*/5 * * * *", "2026-01-01T10:05:00Z",
			[]string{"2026-01-01T10:10:00Z"}},
		{"hourly", "@hourly", "2026-01-01T10:02:03Z",
			[]string{"2026-01-01T11:00:00Z", "2026-01-01T12:00:00Z"}},
		{"daily", "@daily", "2026-01-01T10:00:00Z",
			[]string{"2026-01-02T00:00:00Z", "2026-01-03T00:00:00Z"}},
		{"weekly on Sundays", "@weekly", "2026-01-01T10:00:00Z", // a Thursday
			[]string{"2026-01-04T00:00:00Z", "2026-01-11T00:00:00Z"}},
		{"monthly", "@monthly", "2026-01-31T10:00:00Z",
			[]string{"2026-02-01T00:00:00Z", "2026-03-01T00:00:00Z"}},
		{"names and ranges", "0 9 * jan mon-fri", "2026-01-02T10:00:00Z", // a Friday
			[]string{"2026-01-05T09:00:00Z", "2026-01-06T09:00:00Z"}},
		{"UTC whatever the zone of from", "0 3 * * *", "2026-01-01T02:30:00+01:00",
			[]string{"2026-01-01T03:00:00Z"}},
		{"every second, on whole seconds", "@every 1s", "2026-01-01T10:00:00.3Z",
			[]string{"2026-01-01T10:00:01Z", "2026-01-01T10:00:02Z"}},
		{"every 90 minutes since the epoch", "@every 90m", "2026-01-01T00:00:00Z",
			[]string{"2026-01-01T01:30:00Z", "2026-01-01T03:00:00Z"}},
		{"every 90 minutes before the epoch", "@every 90m", "1969-12-31T23:00:00Z",
			[]string{"1970-01-01T00:00:00Z", "1970-01-01T01:30:00Z"}},
		{"every 7e9 seconds, past what nanoseconds since the epoch hold", "@every 7000000000s", "2191-10-27T12:26:40Z",
			[]string{"2413-08-23T00:53:20Z", "2635-06-19T13:20:00Z"}},
		{"in a time zone", "CRON_TZ=America/New_York 0 9 * * *", "2026-01-01T00:00:00Z",
			[]string{"2026-01-01T14:00:00Z", "2026-01-02T14:00:00Z"}},
		{"TZ= works too", "TZ=Asia/Tokyo 0 9 * * *", "2026-01-01T00:00:00Z",
			[]string{"2026-01-02T00:00:00Z"}},
		// Europe/Berlin goes from 02:00 CET to 03:00 CEST on 2026-03-29 and
		// from 03:00 CEST back to 02:00 CET on 2026-10-25.
		{"a time skipped by DST runs at the change", "CRON_TZ=Europe/Berlin 30 2 * * *", "2026-03-28T12:00:00Z",
			[]string{"2026-03-29T01:00:00Z", "2026-03-30T00:30:00Z"}},
		{"a time repeated by DST runs once, the first time", "CRON_TZ=Europe/Berlin 30 2 * * *", "2026-10-24T12:00:00Z",
			[]string{"2026-10-25T00:30:00Z", "2026-10-26T01:30:00Z"}},
		{"a daily job keeps its wall time across DST", "CRON_TZ=Europe/Berlin 0 9 * * *", "2026-03-28T12:00:00Z",
			[]string{"2026-03-29T07:00:00Z", "2026-03-30T07:00:00Z"}},
		{"an hour-* job runs in both passes of a repeated hour", "CRON_TZ=Europe/Berlin 30 * * * *", "2026-10-25T00:00:00Z",
			[]string{"2026-10-25T00:30:00Z", "2026-10-25T01:30:00Z", "2026-10-25T02:30:00Z"}},
		{"an hour-* job skips the missing hour", "CRON_TZ=Europe/Berlin 30 * * * *", "2026-03-29T00:00:00Z",
			[]string{"2026-03-29T00:30:00Z", "2026-03-29T01:30:00Z"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, err := Parse(c.spec)
			if err != nil {
				t.Fatal(err)
			}
			got := ticks(s, utc(c.from), len(c.want))
			for i := range c.want {
				if got[i] != c.want[i] {
					t.Fatalf("ticks of %q after %s = %v, want %v", c.spec, c.from, got, c.want)
				}
			}
		})
	}
}

func TestParseIn(t *testing.T) {
	paris, err := time.LoadLocation("Europe/Paris")
	if err != nil {
		t.Fatal(err)
	}
	s, err := ParseIn("0 3 * * *", paris)
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Next(utc("2026-01-01T00:00:00Z")); !got.Equal(utc("2026-01-01T02:00:00Z")) {
		t.Errorf("Next = %v, want 02:00 UTC (03:00 in Paris)", got)
	}
	if s.Location() != paris || s.String() != "0 3 * * *" {
		t.Errorf("Location %v, String %q", s.Location(), s.String())
	}
	if _, err := ParseIn("CRON_TZ=UTC 0 3 * * *", paris); !errors.Is(err, ErrInvalidSchedule) {
		t.Errorf("ParseIn with a prefix too: %v", err)
	}
	if _, err := ParseIn("0 3 * * *", nil); !errors.Is(err, ErrInvalidSchedule) {
		t.Errorf("ParseIn with a nil zone: %v", err)
	}
}

func TestParseRejects(t *testing.T) {
	for _, spec := range []string{
		"", "   ", "* * * *", "* * * * * *", "61 * * * *", "* 24 * * *", "* * 0 * *", "* * * 13 *",
		"* * * * mon-xyz", "@sometimes", "@every", "@every 0s", "@every -1m", "@every 500ms",
		"@every 1.5s", "@every soon", "CRON_TZ=Mars/Phobos 0 3 * * *", "CRON_TZ=Europe/Paris",
		"CRON_TZ= 0 3 * * *", "TZ=Local 0 3 * * *", "0 0 30 2 *", "0 0 31 2,4 *",
		"CRON_TZ=Europe/Berlin 0 0 30 2 *", "CRON_TZ=Australia/Lord_Howe 0 0 31 2,4,6 *",
	} {
		t.Run(spec, func(t *testing.T) {
			s, err := Parse(spec)
			if !errors.Is(err, ErrInvalidSchedule) {
				t.Fatalf("Parse(%q) = %v, %v; want an error wrapping ErrInvalidSchedule", spec, s, err)
			}
		})
	}
}

// TestParseEveryErrors: a bad @every says what to write instead, naming
// @every and its bounds, whatever is wrong with it: no duration at all
// (which robfig's parser called an "unrecognized descriptor"), one below a
// second, zero, negative, or not whole seconds. Whitespace other than one
// space (a tab) between @every and its duration is whitespace, as between
// cron fields.
func TestParseEveryErrors(t *testing.T) {
	for _, c := range []struct {
		spec string
		ok   bool
	}{
		{spec: "@every"},
		{spec: "@every   "},
		{spec: "@every 0"},
		{spec: "@every 0s"},
		{spec: "@every 999ms"},
		{spec: "@every -1s"},
		{spec: "@every 1.5s"},
		{spec: "@every 1s 2s"},
		{spec: "@every\t1s", ok: true},
		{spec: "@every  90s", ok: true},
	} {
		t.Run(c.spec, func(t *testing.T) {
			s, err := Parse(c.spec)
			if c.ok {
				if err != nil {
					t.Fatalf("Parse(%q): %v", c.spec, err)
				}
				if got, want := s.Next(time.Unix(0, 0)), time.Unix(int64(s.every/time.Second), 0).UTC(); !got.Equal(want) {
					t.Errorf("Parse(%q).Next(epoch) = %v, want %v", c.spec, got, want)
				}
				return
			}
			if !errors.Is(err, ErrInvalidSchedule) {
				t.Fatalf("Parse(%q) = %v, %v; want an error wrapping ErrInvalidSchedule", c.spec, s, err)
			}
			for _, part := range []string{"@every", "whole number of seconds", "at least 1s", "@every 5m"} {
				if !strings.Contains(err.Error(), part) {
					t.Errorf("Parse(%q): %v; want it to say %q", c.spec, err, part)
				}
			}
		})
	}
}
