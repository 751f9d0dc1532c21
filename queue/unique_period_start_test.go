package queue

import (
	"testing"
	"time"

	"github.com/jobqueue/jobqueue/internal/engine"
)

// TestUniqueForCountedFromEnqueue: UniqueFor's period runs from the
// enqueue, not from the job's end (SPEC section 8): a job that ran for 50
// minutes of a one-hour period holds its key 10 minutes after it
// finished, not an hour; and a Retry keeps the period of the enqueue.
func TestUniqueForCountedFromEnqueue(t *testing.T) {
	forEachEngine(t, func(t *testing.T, kind engine.Kind) {
		env := coreEnv(t, kind)
		q, clock := coreQueue(t, env)
		id := newKeyed(t, q, "p", UniqueFor(time.Hour))
		rows := mustClaim(t, q, nil, 1, 2*time.Hour)
		if len(rows) != 1 || rows[0].ID != id {
			t.Fatalf("claimed %v, want job %d", rows, id)
		}
		clock.add(50 * time.Minute)
		if stale, err := q.complete(t.Context(), []attemptRef{rows[0].ref()}); err != nil || len(stale) != 0 {
			t.Fatalf("complete = %v, %v", stale, err)
		}
		clock.add(9 * time.Minute)
		wantDup(t, q, "p", id)
		clock.add(2 * time.Minute) // 61 minutes after the enqueue
		next := wantNew(t, q, "p", id)

		// The new job fails for good at once; retried 30 minutes later it
		// holds the key while pending, and once it has ended again the key
		// is free after the hour from its enqueue, not from the Retry.
		failForGood(t, q, DefaultType)
		clock.add(30 * time.Minute)
		if ok, err := q.Retry(t.Context(), next); err != nil || !ok {
			t.Fatalf("Retry = %v, %v", ok, err)
		}
		wantDup(t, q, "p", next)
		failForGood(t, q, DefaultType)
		clock.add(31 * time.Minute) // 61 minutes after its enqueue
		wantNew(t, q, "p", id, next)
	})
}
