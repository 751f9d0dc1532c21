package policy

import (
	"errors"
	"math"
	"testing"
	"time"
)

func TestBackoff(t *testing.T) {
	cases := []struct {
		attempts, base, max int64
		want                time.Duration
	}{
		{1, 60, 3600, 60 * time.Second},
		{2, 60, 3600, 120 * time.Second},
		{3, 60, 3600, 240 * time.Second},
		{7, 60, 3600, 3600 * time.Second},
		{1000, 60, 3600, 3600 * time.Second},
		{0, 5, 10, 5 * time.Second},
		{1, 10, 5, 5 * time.Second},
	}
	for _, c := range cases {
		if got := Backoff(c.attempts, c.base, c.max); got != c.want {
			t.Errorf("Backoff(%d, %d, %d) = %v, want %v", c.attempts, c.base, c.max, got, c.want)
		}
	}
}

func TestValidate(t *testing.T) {
	cases := []struct {
		name string
		p    RetryPolicy
		ok   bool
	}{
		{"default", Default, true},
		{"zero attempts", RetryPolicy{0, time.Second, time.Second}, false},
		{"negative attempts", RetryPolicy{-1, time.Second, time.Second}, false},
		{"zero base", RetryPolicy{1, 0, time.Second}, false},
		{"negative max", RetryPolicy{1, time.Second, -time.Second}, false},
		{"fraction", RetryPolicy{1, 1500 * time.Millisecond, 2 * time.Second}, false},
		{"base above max", RetryPolicy{1, time.Hour, time.Minute}, true},
		{"largest", RetryPolicy{math.MaxInt32, math.MaxInt32 * time.Second, math.MaxInt32 * time.Second}, true},
		{"attempts beyond INT", RetryPolicy{math.MaxInt32 + 1, time.Second, time.Second}, false},
		{"base beyond INT", RetryPolicy{1, (math.MaxInt32 + 1) * time.Second, time.Second}, false},
		{"max beyond INT", RetryPolicy{1, time.Second, (math.MaxInt32 + 1) * time.Second}, false},
	}
	for _, c := range cases {
		err := c.p.Validate()
		if (err == nil) != c.ok {
			t.Errorf("%s: Validate() = %v, want ok=%v", c.name, err, c.ok)
		}
		if err != nil && !errors.Is(err, ErrInvalidPolicy) {
			t.Errorf("%s: error %v is not ErrInvalidPolicy", c.name, err)
		}
	}
}
