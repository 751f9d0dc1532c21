// Package duration holds the one rule for the durations a person types,
// on the command line (--older-than, --delay, …) and in the dashboard
// (prune's age): Go's durations (90s, 15m, 2h) or whole days (7d), never
// negative.
package duration

import (
	"errors"
	"math"
	"strconv"
	"strings"
	"time"
)

// MaxDays is the most days a duration may have (time.Duration's range).
const MaxDays = math.MaxInt64 / int64(24*time.Hour)

// Errors of Parse.
var (
	// ErrSyntax: the text is neither a Go duration nor a whole number of
	// days.
	ErrSyntax = errors.New("not a duration; write it like 90s, 15m, 2h or 7d")
	// ErrTooLong: more days than MaxDays.
	ErrTooLong = errors.New("too long")
	// ErrNegative: the duration is below zero.
	ErrNegative = errors.New("must not be negative")
)

// Parse reads s, a Go duration ("90s", "1h30m") or a whole number of days
// ("7d"). The error is ErrSyntax, ErrTooLong or ErrNegative.
func Parse(s string) (time.Duration, error) {
	var d time.Duration
	if days, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.ParseInt(days, 10, 32)
		if err != nil {
			return 0, ErrSyntax
		}
		if n > MaxDays || n < -MaxDays {
			return 0, ErrTooLong
		}
		d = time.Duration(n) * 24 * time.Hour
	} else {
		var err error
		if d, err = time.ParseDuration(s); err != nil {
			return 0, ErrSyntax
		}
	}
	if d < 0 {
		return 0, ErrNegative
	}
	return d, nil
}
