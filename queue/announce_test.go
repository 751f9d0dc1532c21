package queue

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jobqueue/jobqueue/internal/testdb"
)

// TestAnnouncerAfterCommit: requestAfterCommit keeps one pending shot per
// delay however often it is called; each shot runs onShot and announces;
// flush sends the pending shots at once.
func TestAnnouncerAfterCommit(t *testing.T) {
	var delivered, shots atomic.Int64
	a := newAnnouncer(testdb.QuietLogger(), "test", func(context.Context, []string) error {
		delivered.Add(1)
		return nil
	})
	a.onShot = func() { shots.Add(1) }
	pending := func() int {
		a.mu.Lock()
		defer a.mu.Unlock()
		n := 0
		for _, s := range a.shots {
			if s != nil {
				n++
			}
		}
		return n
	}
	for range 10 {
		a.requestAfterCommit()
	}
	if n := pending(); n != len(afterCommitShots) {
		t.Fatalf("%d shots pending after 10 requests, want %d", n, len(afterCommitShots))
	}
	// The first shots fire by themselves (5 and 50 ms)...
	waitUntil(t, 5*time.Second, "the first two shots", func() bool { return shots.Load() == 2 && pending() == 1 })
	// ... and flush sends the last at once instead of in half a second.
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	a.flush(ctx)
	if ctx.Err() != nil {
		t.Fatal("flush waited for the last shot's delay")
	}
	if got, n := shots.Load(), pending(); got != 3 || n != 0 {
		t.Errorf("after flush: %d shots ran, %d pending; want 3 and 0", got, n)
	}
	if n := delivered.Load(); n < 1 || n > 3 {
		t.Errorf("%d announcements delivered for 3 shots, want 1 to 3 (a burst shares one)", n)
	}
}
