package queue

import "testing"

// TestFailureStreak: of a run of failures only the first is first, and only
// the success right after a run ends one.
func TestFailureStreak(t *testing.T) {
	var s failureStreak
	for i, step := range []struct {
		fail bool
		want bool // failed: first of a run; succeeded: ended a run
	}{
		{fail: false, want: false},
		{fail: true, want: true},
		{fail: true, want: false},
		{fail: true, want: false},
		{fail: false, want: true},
		{fail: false, want: false},
		{fail: true, want: true},
		{fail: false, want: true},
	} {
		var got bool
		if step.fail {
			got = s.failed()
		} else {
			got = s.succeeded()
		}
		if got != step.want {
			t.Errorf("step %d (failure: %v) = %v, want %v", i, step.fail, got, step.want)
		}
	}
}
