package queue

import (
	"testing"
	"time"
)

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
	case <-time.After(time.Second):
		t.Fatal("not woken by notify")
	}
	select {
	case <-h.wait():
		t.Fatal("a new wait is already woken")
	default:
	}
}
