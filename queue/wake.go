package queue

import "sync"

// wakeHub wakes idle workers of this process at once when a job is
// enqueued here, instead of letting them wait for their next poll. Workers
// in other processes still find the job by polling.
type wakeHub struct {
	mu sync.Mutex
	ch chan struct{}
}

func newWakeHub() *wakeHub {
	return &wakeHub{ch: make(chan struct{})}
}

// wait returns a channel that is closed at the next notify.
func (h *wakeHub) wait() <-chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.ch
}

// notify wakes everyone waiting.
func (h *wakeHub) notify() {
	h.mu.Lock()
	defer h.mu.Unlock()
	close(h.ch)
	h.ch = make(chan struct{})
}
