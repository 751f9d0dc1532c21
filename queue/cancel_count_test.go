package queue

import (
	"testing"
	"time"
)

// TestCancelCountedByCanceller is the table of the rule that splits the
// counting of cancelled attempts between the canceller (lease passed) and
// the worker (lease running), compared to the second.
func TestCancelCountedByCanceller(t *testing.T) {
	at := time.Date(2030, 1, 2, 3, 4, 5, 600_000_000, time.UTC)
	ptr := func(d time.Duration) *time.Time { l := at.Add(d); return &l }
	cases := []struct {
		name  string
		lease *time.Time
		want  bool
	}{
		{"no lease", nil, true},
		{"passed long ago", ptr(-time.Hour), true},
		{"passed in the second before", ptr(-time.Second), true},
		{"ends earlier in the same second", ptr(-500 * time.Millisecond), false},
		{"ends at the cancel", ptr(0), false},
		{"ends later in the same second", ptr(300 * time.Millisecond), false},
		{"running", ptr(time.Minute), false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := cancelCountedByCanceller(tc.lease, at); got != tc.want {
				t.Errorf("cancelCountedByCanceller(%v, %v) = %v, want %v", tc.lease, at, got, tc.want)
			}
		})
	}
}
