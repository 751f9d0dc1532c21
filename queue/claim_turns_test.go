package queue

import (
	"errors"
	"testing"
)

// TestTakesTurn: a claim takes the table's turn only when it asks for at
// least min jobs and the last claim took all it asked for.
func TestTakesTurn(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		lastFull bool
		max, min int
		want     bool
	}{
		{"large, after a full claim", true, 900, claimTurnMin, true},
		{"exactly min, after a full claim", true, claimTurnMin, claimTurnMin, true},
		{"small, after a full claim", true, claimTurnMin - 1, claimTurnMin, false},
		{"a slot's claim, after a full claim", true, 1, claimTurnMin, false},
		{"large, after a short claim", false, 900, claimTurnMin, false},
		{"a slot's claim, min 1", true, 1, 1, true},
	} {
		if got := takesTurn(tc.lastFull, tc.max, tc.min); got != tc.want {
			t.Errorf("%s: takesTurn(%v, %d, %d) = %v, want %v", tc.name, tc.lastFull, tc.max, tc.min, got, tc.want)
		}
	}
}

// TestClaimTurns: a new session's first claim claims at once, and each
// claim's outcome (all it asked for, fewer, or an error) and the next
// claim's size decide whether the next takes its turn.
func TestClaimTurns(t *testing.T) {
	t.Parallel()
	turns := newClaimTurns()
	if turns.next(900) {
		t.Fatal("a new session's first claim takes its turn; want it to claim at once")
	}
	for i, step := range []struct {
		max, claimed int
		err          error
		next         int // the next claim's size
		want         bool
	}{
		{16, 16, nil, 900, true},               // a worker's first claim, of its slots, then its first claim ahead
		{16, 16, nil, claimTurnMin - 1, false}, // full, but the next is small
		{900, 899, nil, 900, false},            // short: the table is idle
		{900, 900, nil, 900, true},             // full
		{900, 900, errors.New("broken connection"), 900, false},
		{0, 0, nil, 900, false}, // asked for nothing
	} {
		turns.record(step.max, step.claimed, step.err)
		if got := turns.next(step.next); got != step.want {
			t.Errorf("after claim %d (%d of %d, %v): next(%d) = %v, want %v", i+1, step.claimed, step.max, step.err, step.next, got, step.want)
		}
	}
}
