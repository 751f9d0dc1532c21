package queue

import (
	"slices"
	"testing"
)

// TestStatusConstants: the named statuses are Statuses (internal/ddl's
// list), in the order of a job's life: a status added to or removed from
// that list without its constant here, or a constant renamed, fails.
func TestStatusConstants(t *testing.T) {
	named := []Status{StatusPending, StatusInProgress, StatusCompleted, StatusFailed, StatusExpired}
	if got := Statuses(); !slices.Equal(got, named) {
		t.Errorf("Statuses() = %v, want the named statuses %v in this order", got, named)
	}
	s := Statuses()
	s[0] = "changed"
	if Statuses()[0] == "changed" {
		t.Error("Statuses() shares its slice between calls")
	}
}
