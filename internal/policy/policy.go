// Package policy holds a job's retry policy and its backoff rule, shared by
// the queue (which applies it) and the migrations (which store it with every
// job of a version 1 table). The public packages re-export RetryPolicy.
package policy

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// ErrInvalidPolicy is returned for a retry policy with a zero or negative
// field, or with delays that do not fit the table's whole seconds.
var ErrInvalidPolicy = errors.New("jobqueue: invalid retry policy")

// RetryPolicy says how often a job is attempted and how long it waits
// between attempts: after attempt n fails, it waits
// min(BaseDelay × 2^(n−1), MaxDelay). Delays are stored in whole seconds.
type RetryPolicy struct {
	// MaxAttempts is the number of attempts, the first one included.
	MaxAttempts int
	// BaseDelay is the wait after the first failed attempt.
	BaseDelay time.Duration
	// MaxDelay caps the wait between attempts.
	MaxDelay time.Duration
}

// Default is the policy of a queue that configures none: 3 attempts, a base
// delay of one minute and a maximum delay of one hour.
var Default = RetryPolicy{MaxAttempts: 3, BaseDelay: time.Minute, MaxDelay: time.Hour}

// maxColumn is the largest number the table's INT columns hold: max_attempts
// and the delays in seconds are each stored in one.
const maxColumn = math.MaxInt32

// Validate reports a zero or negative field, delays that are not whole
// seconds, or a number too large for the table's INT columns (without this
// check PostgreSQL would refuse it mid-statement and MySQL would wrap it). A
// base delay above the maximum simply waits the maximum.
func (p RetryPolicy) Validate() error {
	switch {
	case p.MaxAttempts <= 0:
		return fmt.Errorf("%w: MaxAttempts is %d; it must be at least 1", ErrInvalidPolicy, p.MaxAttempts)
	case p.MaxAttempts > maxColumn:
		return fmt.Errorf("%w: MaxAttempts is %d; the table holds at most %d", ErrInvalidPolicy, p.MaxAttempts, maxColumn)
	case p.BaseDelay < time.Second:
		return fmt.Errorf("%w: BaseDelay is %v; it must be at least 1s", ErrInvalidPolicy, p.BaseDelay)
	case p.MaxDelay < time.Second:
		return fmt.Errorf("%w: MaxDelay is %v; it must be at least 1s", ErrInvalidPolicy, p.MaxDelay)
	case p.BaseDelay%time.Second != 0 || p.MaxDelay%time.Second != 0:
		return fmt.Errorf("%w: delays %v and %v must be whole seconds", ErrInvalidPolicy, p.BaseDelay, p.MaxDelay)
	case p.BaseDelay/time.Second > maxColumn:
		return fmt.Errorf("%w: BaseDelay %v is too long; the table holds at most %d seconds (about 68 years), and a BaseDelay above MaxDelay waits MaxDelay anyway", ErrInvalidPolicy, p.BaseDelay, maxColumn)
	case p.MaxDelay/time.Second > maxColumn:
		return fmt.Errorf("%w: MaxDelay %v is too long; the table holds at most %d seconds (about 68 years)", ErrInvalidPolicy, p.MaxDelay, maxColumn)
	}
	return nil
}

// Seconds returns the policy as the table stores it.
func (p RetryPolicy) Seconds() (maxAttempts, baseDelay, maxDelay int64) {
	return int64(p.MaxAttempts), int64(p.BaseDelay / time.Second), int64(p.MaxDelay / time.Second)
}

// Backoff is the wait after attempt number attempts (1 for the first) has
// failed, for a job whose stored policy is base and max seconds:
// min(base × 2^(attempts−1), max) seconds, without overflowing.
func Backoff(attempts, baseSeconds, maxSeconds int64) time.Duration {
	if attempts < 1 {
		attempts = 1
	}
	d := baseSeconds
	for i := int64(1); i < attempts && d < maxSeconds; i++ {
		d *= 2
	}
	if d > maxSeconds {
		d = maxSeconds
	}
	return time.Duration(d) * time.Second
}
