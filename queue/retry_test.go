package queue

import (
	"testing"
	"time"
)

// TestDecideRetry is the table of Retry's rule: which jobs are retried
// and which keep their deadline.
func TestDecideRetry(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	ahead, passed := now.Add(time.Hour), now.Add(-time.Hour)
	cases := []struct {
		name      string
		status    Status
		expiresAt *time.Time
		ok        bool
		keep      *time.Time // the deadline written
	}{
		{name: "missing job", status: "", ok: false},
		{name: "pending", status: StatusPending, ok: false},
		{name: "in_progress", status: StatusInProgress, expiresAt: &ahead, ok: false},
		{name: "completed", status: StatusCompleted, ok: false},
		{name: "failed without deadline", status: StatusFailed, ok: true},
		{name: "failed, deadline ahead is kept", status: StatusFailed, expiresAt: &ahead, ok: true, keep: &ahead},
		{name: "failed, deadline passed is cleared", status: StatusFailed, expiresAt: &passed, ok: true},
		{name: "failed, deadline now is cleared", status: StatusFailed, expiresAt: &now, ok: true},
		{name: "expired, deadline passed is cleared", status: StatusExpired, expiresAt: &passed, ok: true},
		{name: "expired, deadline ahead is cleared too", status: StatusExpired, expiresAt: &ahead, ok: true},
		{name: "expired without deadline", status: StatusExpired, ok: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w, ok := decideRetry(c.status, c.expiresAt, now)
			if ok != c.ok {
				t.Fatalf("decideRetry(%q) ok = %v; want %v", c.status, ok, c.ok)
			}
			if !ok {
				if w != (retryWrite{}) {
					t.Fatalf("decideRetry(%q) = %+v with ok false; want the zero write", c.status, w)
				}
				return
			}
			if w.from != c.status {
				t.Fatalf("decideRetry(%q) fences by %q; want the status read", c.status, w.from)
			}
			switch {
			case c.keep == nil && w.expiresAt != nil:
				t.Fatalf("decideRetry(%q, %v) keeps the deadline %v; want it cleared", c.status, c.expiresAt, *w.expiresAt)
			case c.keep != nil && (w.expiresAt == nil || !w.expiresAt.Equal(*c.keep)):
				t.Fatalf("decideRetry(%q, %v) writes deadline %v; want %v kept", c.status, c.expiresAt, w.expiresAt, *c.keep)
			}
		})
	}
}
