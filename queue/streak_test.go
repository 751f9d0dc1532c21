package queue

import "testing"

// TestFailureStreak: of a run of failures only the first is first, the run
// counts its failures, and only the success right after a run ends one,
// saying how many failures it had.
func TestFailureStreak(t *testing.T) {
	var s failureStreak
	for i, step := range []struct {
		fail  bool
		first bool // failed: the first of a run
		count int  // the run's failures after the step
		ended int  // succeeded: the failures of the run it ended
	}{
		{fail: false},
		{fail: true, first: true, count: 1},
		{fail: true, count: 2},
		{fail: true, count: 3},
		{fail: false, ended: 3},
		{fail: false},
		{fail: true, first: true, count: 1},
		{fail: false, ended: 1},
	} {
		if step.fail {
			if got := s.failed(); got != step.first {
				t.Errorf("step %d: failed() = %v, want %v", i, got, step.first)
			}
		} else if got, lasted := s.succeeded(); got != step.ended || (got == 0) != (lasted == 0) {
			t.Errorf("step %d: succeeded() = %d failures over %v, want %d", i, got, lasted, step.ended)
		}
		if got := s.count(); got != step.count {
			t.Errorf("step %d: count() = %d, want %d", i, got, step.count)
		}
	}
}

// TestFailureStreaks: the streaks of two tasks are apart, and a task's is
// the same at each use.
func TestFailureStreaks(t *testing.T) {
	var m failureStreaks
	for i, step := range []struct {
		name  string
		first bool
	}{
		{"expire", true},
		{"reclaim", true},
		{"expire", false},
		{"reclaim", false},
	} {
		if got := m.of(step.name).failed(); got != step.first {
			t.Errorf("step %d: %s failed() = %v, want %v", i, step.name, got, step.first)
		}
	}
	if n, _ := m.of("expire").succeeded(); n != 2 {
		t.Errorf("expire's run ended after %d failures, want 2", n)
	}
	if n := m.of("reclaim").count(); n != 2 {
		t.Errorf("reclaim's run has %d failures, want 2 (another task's success ended it)", n)
	}
}
