package queue

import (
	"slices"
	"testing"
	"time"
)

// TestInflightSetRenewsSettlingWhenDue: the heartbeater renews every
// attempt whose handler has not returned, and an attempt whose result is
// being written (settling) only when its lease ends before due, so that a
// completion written at once is not renewed beside its write while one
// held back keeps its lease; len counts the attempts whose handlers have
// not returned, and settling ones leave the set once written.
func TestInflightSetRenewsSettlingWhenDue(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	due := now.Add(time.Minute)
	cases := []struct {
		name      string
		settling  bool
		leaseEnd  time.Time
		wantRenew bool
	}{
		{"running, lease far", false, now.Add(time.Hour), true},
		{"running, lease near", false, now.Add(time.Second), true},
		{"settling, lease far", true, now.Add(time.Hour), false},
		{"settling, lease before due", true, now.Add(time.Second), true},
		{"settling, lease passed", true, now.Add(-time.Second), true},
	}
	s := newInflightSet()
	var want []attemptRef
	var settled []completion
	for i, c := range cases {
		a := &attempt{ref: attemptRef{ID: int64(i + 1), Token: c.name}, leaseEnd: c.leaseEnd}
		s.add(a)
		if c.settling {
			s.markSettling(a.ref)
			s.markSettling(a.ref) // twice counts once
			settled = append(settled, completion{a: a})
		}
		if c.wantRenew {
			want = append(want, a.ref)
		}
	}
	got := s.toRenew(due)
	byID := func(a, b attemptRef) int { return int(a.ID - b.ID) }
	slices.SortFunc(got, byID)
	if !slices.Equal(got, want) {
		t.Errorf("toRenew = %v, want %v", got, want)
	}
	if n := s.len(); n != 2 {
		t.Errorf("len = %d, want the 2 attempts whose handlers have not returned", n)
	}
	s.removeSettled(settled)
	if n, all := s.len(), len(s.toRenew(due)); n != 2 || all != 2 {
		t.Errorf("after the settling ones were written: len %d, %d to renew; want 2 and 2", n, all)
	}
	s.remove(attemptRef{ID: 1, Token: cases[0].name})
	if n := s.len(); n != 1 {
		t.Errorf("len = %d after a running one was removed, want 1", n)
	}
}
