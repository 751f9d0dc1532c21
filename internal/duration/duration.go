// Package duration holds the one rule for the durations a person types,
// on the command line (--older-than, --delay, …) and in the dashboard
// (prune's age): Go's durations (90s, 15m, 2h) or whole days (7d), never
// negative.
package duration

import (
	"errors"
	"math"
	"regexp"
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
	// ErrTooLong: past time.Duration's range (more than MaxDays days).
	ErrTooLong = errors.New("too long")
	// ErrNegative: the duration is below zero.
	ErrNegative = errors.New("must not be negative")
)

// Parse reads s, a Go duration ("90s", "1h30m") or a whole number of days
// ("7d"). The error is ErrSyntax, ErrTooLong or ErrNegative: one that is
// written right but past time.Duration's range (3000000h, 99999999999d) is
// too long, or negative when it starts with '-'.
func Parse(s string) (time.Duration, error) {
	d, err := parse(s)
	switch {
	case errors.Is(err, ErrTooLong) && strings.HasPrefix(s, "-"):
		return 0, ErrNegative
	case err != nil:
		return 0, err
	case d < 0:
		return 0, ErrNegative
	}
	return d, nil
}

// goSyntax is the form of a Go duration (time.ParseDuration's): an
// optional sign, then numbers with units. Text of that form that
// time.ParseDuration refuses is out of its range.
var goSyntax = regexp.MustCompile(`^[-+]?((\d+\.?\d*|\.\d+)(ns|us|µs|μs|ms|s|m|h))+$`)

// parse is Parse with the sign not yet checked: ErrTooLong for a duration
// past time.Duration's range either way.
func parse(s string) (time.Duration, error) {
	if days, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.ParseInt(days, 10, 64)
		if errors.Is(err, strconv.ErrRange) {
			return 0, ErrTooLong
		}
		if err != nil {
			return 0, ErrSyntax
		}
		if n > MaxDays || n < -MaxDays {
			return 0, ErrTooLong
		}
		return time.Duration(n) * 24 * time.Hour, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		if goSyntax.MatchString(s) {
			return 0, ErrTooLong
		}
		return 0, ErrSyntax
	}
	return d, nil
}
