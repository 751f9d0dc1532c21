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
//
// Each check needs the shots' timers not to have overtaken the test (the
// first fires 5 ms after the requests, the last half a second after): on a
// machine slowed by the race detector and other tests the test may look
// too late to tell, and then tries again with a new announcer. A try that
// can tell and finds a fault fails the test at once.
func TestAnnouncerAfterCommit(t *testing.T) {
	const tries = 10
	var late []string
	for range tries {
		why := announcerAfterCommit(t)
		if why == "" {
			return
		}
		late = append(late, why)
	}
	t.Fatalf("%d tries, each too late to check: %q", tries, late)
}

// announcerAfterCommit is one try of TestAnnouncerAfterCommit: it fails t
// on a fault, and returns why it could not tell (the timers overtook it),
// or "" once every check was made.
func announcerAfterCommit(t *testing.T) string {
	t.Helper()
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
	first, last := afterCommitShots[0], afterCommitShots[len(afterCommitShots)-1]
	t0 := time.Now() // no shot fires before t0 + its delay
	for range 10 {
		a.requestAfterCommit()
	}
	n := pending()
	if time.Since(t0) >= first {
		flushAll(a)
		return "the first shot was due before the pending shots were counted"
	}
	if n != len(afterCommitShots) {
		t.Fatalf("%d shots pending after 10 requests, want %d", n, len(afterCommitShots))
	}
	// The first shots fire by themselves (5 and 50 ms; each once more for
	// the calls after the first, rearmShot)... A shot's onShot runs after
	// it left a.shots: wait for the count of their onShots, which is 1 for
	// a shot that ended armed for the first call (as the pending last one
	// still is) and 2 for one that was armed again.
	firstShots := func() int64 {
		a.mu.Lock()
		defer a.mu.Unlock()
		n := int64(0)
		for i := range len(afterCommitShots) - 1 {
			if a.armedFor[i].Equal(a.armedFor[len(afterCommitShots)-1]) {
				n++
			} else {
				n += 2
			}
		}
		return n
	}
	deadline := time.Now().Add(30 * time.Second)
	for !(pending() == 1 && shots.Load() == firstShots()) {
		if pending() == 0 {
			return "the last shot fired by itself before the first two were seen done"
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for the first two shots: %d shots, %d pending", shots.Load(), pending())
		}
		time.Sleep(time.Millisecond)
	}
	before := shots.Load()
	// ... and flush sends the last at once instead of in half a second: it
	// returns before the last shot is due, having sent it.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	a.flush(ctx)
	if time.Since(t0) >= last {
		return "flush returned once the last shot was due (a flush that waits for it would too)"
	}
	if got, n := shots.Load()-before, pending(); got != 1 || n != 0 {
		t.Errorf("flush ran %d shots and left %d pending; want 1 and 0", got, n)
	}
	if n := delivered.Load(); n < 1 || n > shots.Load() {
		t.Errorf("%d announcements delivered for %d shots, want 1 to %d (a burst shares one)", n, shots.Load(), shots.Load())
	}
	return ""
}

// flushAll sends an abandoned try's pending shots, so that its timers do
// not fire during the next try.
func flushAll(a *announcer) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	a.flush(ctx)
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
