package cron

import (
	"errors"
	"testing"
	"time"
)

// FuzzParse: whatever the schedule, Parse either refuses it with
// ErrInvalidSchedule or returns a Schedule whose ticks move forward: Next
// after a time is later than it (or zero: no tick ahead), and the tick
// after that later still.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"* * * * *", "*/10 1-5 1,15 jan-mar mon-fri", "0 3 * * *", "@hourly", "@every 90s", "@every 0s", "@every -1m",
		"CRON_TZ=Europe/Paris 0 2 * * *", "TZ=America/New_York 30 1 * * *", "TZ=Nowhere/Zone * * * * *", "CRON_TZ= * * * * *",
		"60 * * * *", "* 24 * * *", "0 0 31 2 *", "@reboot", "", "*/0 * * * *", "5-1 * * * *", "1-60/7 * * * *",
		"0 0 * * 7", "0 0 * * 5-7", "0 0 * * 1-7/2", "0 0 * * 7/2", "0 0 * * 7-8", "0 0 * * 5-7/9223372036854775807", "1,,2 * * * *", "* * * * ,"} {
		f.Add(s, int64(1_800_000_000))
	}
	f.Fuzz(func(t *testing.T, spec string, unix int64) {
		s, err := Parse(spec)
		if err != nil {
			if !errors.Is(err, ErrInvalidSchedule) {
				t.Fatalf("%q: error %v is not ErrInvalidSchedule", spec, err)
			}
			return
		}
		// Times from 1970 to 2100, where schedules are asked about.
		at := time.Unix(((unix%4_102_444_800)+4_102_444_800)%4_102_444_800, 0).UTC()
		next := s.Next(at)
		if next.IsZero() {
			return
		}
		if !next.After(at) {
			t.Fatalf("%q: Next(%v) = %v, not after it", spec, at, next)
		}
		if again := s.Next(next); !again.IsZero() && !again.After(next) {
			t.Fatalf("%q: Next(%v) = %v, not after it", spec, next, again)
		}
	})
}
