package queue

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/jobqueue/jobqueue/internal/engine"
)

// TestRetryMany: a result per id, in order: the failed and expired jobs
// are pending again; a pending, running or completed job is refused with
// ErrNotRetryable naming its status, a missing id with ErrJobNotFound, a job whose unique key another live job holds with
// ErrDuplicate naming the holder; an id given twice gets its first result
// twice. The refused jobs are left as they were.
func TestRetryMany(t *testing.T) {
	forEachEngine(t, func(t *testing.T, kind engine.Kind) {
		ctx := context.Background()
		env := coreEnv(t, kind)
		q, clock := coreQueue(t, env)
		f := newControlFixture(t, q, clock)
		keyed := mustEnqueue(t, q, testArgs{N: 6}, Type("k"), UniqueKey("k"))
		if err := q.Cancel(ctx, keyed); err != nil {
			t.Fatal(err)
		}
		holder := mustEnqueue(t, q, testArgs{N: 7}, Type("k"), UniqueKey("k"))

		ids := []int64{f.failed, f.pending, f.expired, f.running, f.completed, f.missing, keyed, f.failed}
		before := map[int64]string{}
		for _, id := range ids {
			before[id] = jobState(t, q, id)
		}
		res, err := q.RetryMany(ctx, ids)
		if err != nil {
			t.Fatal(err)
		}
		want := []error{nil, ErrNotRetryable, nil, ErrNotRetryable, ErrNotRetryable, ErrJobNotFound, ErrDuplicate, nil}
		checkResults(t, "RetryMany", ids, res, want)
		says := map[int]string{1: fmt.Sprintf("job %d is pending", f.pending), 3: "is in_progress", 4: "is completed",
			5: fmt.Sprintf("no job %d", f.missing), 6: fmt.Sprintf("held by job %d", holder)}
		for i, s := range says {
			if !strings.Contains(res[i].Err.Error(), s) {
				t.Errorf("result for id %d = %q; want it to say %q", ids[i], res[i].Err, s)
			}
		}
		for i, id := range ids {
			switch {
			case want[i] == nil:
				if row := getJob(t, q, id); row.Status != StatusPending || row.Attempts != 0 || row.Error != "" {
					t.Errorf("retried job %d is %+v; want pending, no attempts, no error", id, row)
				}
			case !errors.Is(want[i], ErrJobNotFound):
				if after := jobState(t, q, id); after != before[id] {
					t.Errorf("the refused retry of job %d changed it: %s -> %s", id, before[id], after)
				}
			}
		}
		if res, err := q.RetryMany(ctx, nil); err != nil || len(res) != 0 {
			t.Fatalf("RetryMany(nil) = %v, %v", res, err)
		}
	})
}
