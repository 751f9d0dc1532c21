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
	// The first shots fire by themselves (5 and 50 ms; each once more for
	// the calls after the first, rearmShot)...
	waitUntil(t, 5*time.Second, "the first two shots", func() bool { return shots.Load() >= 2 && pending() == 1 })
	before := shots.Load()
	// ... and flush sends the last at once instead of in half a second.
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	a.flush(ctx)
	if ctx.Err() != nil {
		t.Fatal("flush waited for the last shot's delay")
	}
	if got, n := shots.Load()-before, pending(); got != 1 || n != 0 {
		t.Errorf("flush ran %d shots and left %d pending; want 1 and 0", got, n)
	}
	if n := delivered.Load(); n < 1 || n > shots.Load() {
		t.Errorf("%d announcements delivered for %d shots, want 1 to %d (a burst shares one)", n, shots.Load(), shots.Load())
	}
}

// TestRearmShot: a shot that fires is armed again for a call that came
// after the one it was armed for, else it ends.
func TestRearmShot(t *testing.T) {
	t0 := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, c := range []struct {
		name     string
		lastCall time.Time
		want     time.Time
		wantOK   bool
	}{
		{"no later call", t0, time.Time{}, false},
		{"a later call", t0.Add(30 * time.Millisecond), t0.Add(30 * time.Millisecond), true},
		{"an earlier call (clock read before)", t0.Add(-time.Millisecond), time.Time{}, false},
	} {
		got, ok := rearmShot(t0, c.lastCall)
		if !got.Equal(c.want) || ok != c.wantOK {
			t.Errorf("%s: rearmShot = %v, %v; want %v, %v", c.name, got, ok, c.want, c.wantOK)
		}
	}
}
