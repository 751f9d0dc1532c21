package queue

import (
	"context"
	"regexp"
	"testing"

	"github.com/jobqueue/jobqueue/internal/engine"
)

// queryName is the sqlc name of a generated statement's text.
var queryName = regexp.MustCompile(`^-- name: (\w+) `)

// TestControlManyOneStatementPerBatch: CancelMany and DeleteMany change
// the jobs of a batch of up to controlBatch ids in one statement (on MySQL
// after one locking read of the batch, in one transaction), and read the
// statuses of the ids they did not change at most once per batch.
func TestControlManyOneStatementPerBatch(t *testing.T) {
	forEachEngine(t, func(t *testing.T, kind engine.Kind) {
		ctx := context.Background()
		env := coreEnv(t, kind)
		var sc stmtCounter
		q, _ := coreQueue(t, env, withStatementHook(sc.observe))
		var args []JobArgs
		for i := range controlBatch + 10 {
			args = append(args, testArgs{N: i})
		}
		if _, err := q.EnqueueMany(ctx, args); err != nil {
			t.Fatal(err)
		}
		rows, err := q.List(ctx, ListFilter{Limit: controlBatch + 10})
		if err != nil || len(rows) != controlBatch+10 {
			t.Fatalf("List = %d rows, %v", len(rows), err)
		}
		var ids []int64
		for _, r := range rows {
			ids = append(ids, r.ID)
		}
		ids = append(ids, rows[0].ID+1<<40) // missing: read, not changed
		names := func() map[string]int {
			sc.mu.Lock()
			defer sc.mu.Unlock()
			out := map[string]int{}
			for _, s := range sc.texts {
				if m := queryName.FindStringSubmatch(s); m != nil {
					out[m[1]]++
				} else {
					out["other"]++
				}
			}
			return out
		}
		for _, c := range []struct {
			op, write string
			run       func(context.Context, []int64) ([]IDResult, error)
		}{
			{"CancelMany", "CancelJobs", q.CancelMany},
			{"DeleteMany", "DeleteJobs", q.DeleteMany},
		} {
			sc.reset()
			res, err := c.run(ctx, ids)
			if err != nil || len(res) != len(ids) {
				t.Fatalf("%s = %d results, %v", c.op, len(res), err)
			}
			got := names()
			if got[c.write] != 2 {
				t.Errorf("%s of %d ids: %d %s statements, want 2 (batches of %d)", c.op, len(ids), got[c.write], c.write, controlBatch)
			}
			reads := got["JobStatuses"] + got["LockJobStatuses"]
			if reads > 2 {
				t.Errorf("%s: %d reads of statuses, want at most one per batch", c.op, reads)
			}
		}
		if n := rowCount(t, env); n != 0 {
			t.Fatalf("%d jobs left after DeleteMany of all", n)
		}
	})
}

// TestControlManyRepeatedIDAcrossBatches: an id given twice gets the same
// result twice, also when its second place falls in a later batch of
// controlBatch ids (the second try found the job cancelled, or deleted, by
// the first, and answered ErrJobFinished or ErrJobNotFound).
func TestControlManyRepeatedIDAcrossBatches(t *testing.T) {
	forEachEngine(t, func(t *testing.T, kind engine.Kind) {
		ctx := context.Background()
		env := coreEnv(t, kind)
		q, _ := coreQueue(t, env)
		for _, c := range []struct {
			op  string
			run func(context.Context, []int64) ([]IDResult, error)
		}{
			{"CancelMany", q.CancelMany},
			{"DeleteMany", q.DeleteMany},
		} {
			t.Run(c.op, func(t *testing.T) {
				var args []JobArgs
				for i := range controlBatch + 1 {
					args = append(args, testArgs{N: i})
				}
				if _, err := q.EnqueueMany(ctx, args); err != nil {
					t.Fatal(err)
				}
				rows, err := q.List(ctx, ListFilter{Status: StatusPending, Limit: controlBatch + 1})
				if err != nil || len(rows) != controlBatch+1 {
					t.Fatalf("List = %d rows, %v", len(rows), err)
				}
				var ids []int64
				for _, r := range rows {
					ids = append(ids, r.ID)
				}
				ids = append(ids, ids[0]) // again, after controlBatch others
				res, err := c.run(ctx, ids)
				if err != nil || len(res) != len(ids) {
					t.Fatalf("%s = %d results, %v; want %d", c.op, len(res), err, len(ids))
				}
				if first, again := res[0], res[len(res)-1]; first.Err != nil || again.Err != nil {
					t.Fatalf("%s: id %d given twice: results %v and %v; want success twice", c.op, ids[0], first.Err, again.Err)
				}
			})
		}
	})
}
