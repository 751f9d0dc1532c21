package cron_test

import (
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/jobqueue/jobqueue/queue/cron"
)

// Parse takes a 5-field cron expression (minute, hour, day of month,
// month, day of week), in UTC; Next gives the first tick after a time.
func ExampleParse() {
	s, err := cron.Parse("30 9 * * mon-fri") // 09:30 UTC on weekdays
	if err != nil {
		log.Fatal(err)
	}
	t := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC) // a Friday, after 09:30
	for range 3 {
		t = s.Next(t)
		fmt.Println(t.Format("Mon 2006-01-02 15:04 MST"))
	}
	// Output:
	// Mon 2026-12-07 09:30 UTC
	// Tue 2026-12-08 09:30 UTC
	// Wed 2026-12-09 09:30 UTC
}

// Sunday is 0 or 7 in the day-of-week field, as in crontab(5): 5-7 is
// Friday to Sunday. A list with an empty item is refused, naming its
// field.
func ExampleParse_sunday() {
	s := cron.MustParse("0 10 * * 5-7")                // 10:00 UTC, Friday to Sunday
	t := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC) // a Monday
	for range 3 {
		t = s.Next(t)
		fmt.Println(t.Format("Mon 2006-01-02 15:04"))
	}
	_, err := cron.Parse("0 10 * * 1,,5")
	fmt.Println(err)
	// Output:
	// Fri 2026-12-11 10:00
	// Sat 2026-12-12 10:00
	// Sun 2026-12-13 10:00
	// jobqueue/cron: invalid schedule: "0 10 * * 1,,5": the day-of-week field "1,,5" has an empty list item (a comma at its start or end, or two in a row); remove the extra comma, as in "1,5", or put the missing value there
}

// @every DUR ticks at whole multiples of DUR since the Unix epoch, so that
// every process computes the same ticks, whenever it started.
func ExampleParse_every() {
	s := cron.MustParse("@every 15m")
	t := time.Date(2026, 12, 6, 10, 7, 42, 0, time.UTC)
	fmt.Println(s.Next(t).Format(time.TimeOnly))
	fmt.Println(s.Next(s.Next(t)).Format(time.TimeOnly))
	// Output:
	// 10:15:00
	// 10:30:00
}

// A time zone as a prefix: the schedule follows the zone's wall clock. On
// the night clocks go forward in Paris (02:00 becomes 03:00 on 29 March
// 2026), a job at 02:30 runs at the moment of the change, as cron does;
// the next night at 02:30 again.
func ExampleParse_timeZone() {
	s, err := cron.Parse("CRON_TZ=Europe/Paris 30 2 * * *")
	if err != nil {
		log.Fatal(err)
	}
	paris, err := time.LoadLocation("Europe/Paris")
	if err != nil {
		log.Fatal(err)
	}
	t := time.Date(2026, 3, 28, 12, 0, 0, 0, time.UTC)
	for range 2 {
		t = s.Next(t)
		fmt.Println(t.In(paris).Format("2006-01-02 15:04 MST"), "=", t.UTC().Format("15:04 MST"))
	}
	// Output:
	// 2026-03-29 03:00 CEST = 01:00 UTC
	// 2026-03-30 02:30 CEST = 00:30 UTC
}

// ParseIn takes the time zone as a *time.Location instead of a prefix.
// Every error wraps ErrInvalidSchedule and says what is wrong.
func ExampleParseIn() {
	tokyo, err := time.LoadLocation("Asia/Tokyo")
	if err != nil {
		log.Fatal(err)
	}
	s, err := cron.ParseIn("@daily", tokyo)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(s.Next(time.Date(2026, 12, 6, 0, 0, 0, 0, time.UTC)).UTC())

	_, err = cron.Parse("61 * * * *")
	fmt.Println(errors.Is(err, cron.ErrInvalidSchedule))
	// Output:
	// 2026-12-06 15:00:00 +0000 UTC
	// true
}
