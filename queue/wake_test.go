package queue

import "testing"

// TestWakeHub: notify wakes, at once, everyone who took the channel
// before it, and only them.
func TestWakeHub(t *testing.T) {
	h := newWakeHub()
	ch := h.wait()
	select {
	case <-ch:
		t.Fatal("woken before notify")
	default:
	}
	h.notify()
	select {
	case <-ch:
	default:
		t.Fatal("not woken by notify")
	}
	select {
	case <-h.wait():
		t.Fatal("a new wait is already woken")
	default:
	}
}
