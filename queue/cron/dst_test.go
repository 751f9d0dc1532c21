package cron

import (
	"testing"
	"time"
)

// TestNextAcrossTransitions: ticks in zones whose clocks change at
// midnight (Asia/Beirut, Africa/Cairo) or by 30 minutes
// (Australia/Lord_Howe), where robfig's Next in the zone skipped days or
// invented ticks, a 29 February eight years after the last one, and the
// last day of a leap year far ahead.
func TestNextAcrossTransitions(t *testing.T) {
	cases := []struct{ spec, from, want string }{
		// Beirut goes from 00:00 EET to 01:00 EEST on Sunday 2026-03-29.
		{"CRON_TZ=Asia/Beirut 0 12 * * sun", "2026-03-22T10:00:00Z", "2026-03-29T09:00:00Z"},
		{"CRON_TZ=Asia/Beirut 0 12 29 3 *", "2026-03-01T00:00:00Z", "2026-03-29T09:00:00Z"},
		// Cairo goes from 00:00 EET to 01:00 EEST on Friday 2026-04-24.
		{"CRON_TZ=Africa/Cairo 0 12 * * fri", "2026-04-17T10:00:00Z", "2026-04-24T09:00:00Z"},
		// Sunday's 00:00 does not exist; 01:00 EEST is the first hour.
		{"CRON_TZ=Asia/Beirut 0 * * * sun", "2026-03-28T12:00:00Z", "2026-03-28T22:00:00Z"},
		// Lord Howe goes from 02:00 (+10:30) to 02:30 (+11) on 2026-10-04.
		{"CRON_TZ=Australia/Lord_Howe 45 1 * * *", "2026-10-03T15:15:00Z", "2026-10-04T14:45:00Z"},
		{"CRON_TZ=Australia/Lord_Howe 0 0 * * *", "2026-10-03T13:30:00Z", "2026-10-04T13:00:00Z"},
		// 2100 is not a leap year: 29 February comes 8 years after 2096.
		{"0 0 29 2 *", "2096-03-01T00:00:00Z", "2104-02-29T00:00:00Z"},
		{"CRON_TZ=Europe/Berlin 0 0 29 2 *", "2096-03-01T00:00:00Z", "2104-02-28T23:00:00Z"},
		// Go's ZoneBounds ends a period before the instant on 31 December
		// of leap years past the zone's table (Go 1.26).
		{"CRON_TZ=Europe/Berlin 0 9 * * *", "2040-12-30T08:00:00Z", "2040-12-31T08:00:00Z"},
		{"CRON_TZ=Europe/Berlin 0 9 * * *", "2040-12-31T08:00:00Z", "2041-01-01T08:00:00Z"},
		{"CRON_TZ=Australia/Lord_Howe 0 9 * * *", "2040-12-30T22:00:00Z", "2040-12-31T22:00:00Z"},
	}
	for _, c := range cases {
		t.Run(c.spec+" after "+c.from, func(t *testing.T) {
			s := MustParse(c.spec)
			if got := s.Next(utc(c.from)).Format(time.RFC3339); got != c.want {
				t.Errorf("Next(%s) = %s, want %s", c.from, got, c.want)
			}
		})
	}
}
