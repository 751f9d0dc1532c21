package testdb

import (
	"slices"
	"testing"
	"time"
)

func TestMissingSeconds(t *testing.T) {
	at := func(s int) time.Time { return time.Date(2026, 12, 2, 5, 0, s, 0, time.UTC) }
	for _, c := range []struct {
		name        string
		ats         []time.Time
		missing     []time.Time
		first, last time.Time
	}{
		{"none", nil, []time.Time{{}}, time.Time{}, time.Time{}},
		{"one", []time.Time{at(3)}, nil, at(3), at(3)},
		{"consecutive, out of order", []time.Time{at(2), at(0), at(1)}, nil, at(0), at(2)},
		{"gaps", []time.Time{at(5), at(1), at(3)}, []time.Time{at(2), at(4)}, at(1), at(5)},
		{"twice", []time.Time{at(1), at(1), at(3)}, []time.Time{at(2)}, at(1), at(3)},
	} {
		t.Run(c.name, func(t *testing.T) {
			missing, first, last := MissingSeconds(c.ats)
			if !slices.Equal(missing, c.missing) || !first.Equal(c.first) || !last.Equal(c.last) {
				t.Errorf("MissingSeconds = %v from %v to %v, want %v from %v to %v", missing, first, last, c.missing, c.first, c.last)
			}
		})
	}
}
