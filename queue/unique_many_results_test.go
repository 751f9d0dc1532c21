package queue

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jobqueue/jobqueue/internal/engine"
)

// manyMode is one way of calling the bulk enqueue with results.
type manyMode struct {
	name string
	// mw adds a middleware that records call.Jobs after next.
	mw bool
	// tx runs the call in a transaction of the test's, committed after.
	tx bool
}

var manyModes = []manyMode{
	{name: "own"},
	{name: "tx", tx: true},
	{name: "middleware", mw: true},
	{name: "middleware-tx", mw: true, tx: true},
}

// TestEnqueueManyResults: EnqueueManyResults (and EnqueueManyResultsTx)
// tell, for every job with a unique key, whether it was written or was a
// duplicate, and the id of the job holding its key (a job of the same call
// included); jobs without a key are written, with no id read back. The
// middleware sees the same ids and duplicates in call.Jobs. Each case runs
// in the queue's own transaction, in the test's, and both with a
// middleware. Before, the bulk path returned only a count.
func TestEnqueueManyResults(t *testing.T) {
	// want of a job: "plain" (no key, written), "new" (keyed, written),
	// "dup:NAME" (a duplicate of the setup's job NAME), "dup:#I" (a
	// duplicate of job I of the same call, itself "new").
	cases := []struct {
		name string
		// setup enqueues the jobs that hold keys before the call (ids by
		// name); p prefixes every key of the case.
		setup func(t *testing.T, q *Queue, clock *fixedClock, p string) map[string]int64
		jobs  func(p string) []JobArgs
		want  []string
	}{
		{
			name: "no keys",
			jobs: func(string) []JobArgs { return []JobArgs{testArgs{N: 1}, testArgs{N: 2}} },
			want: []string{"plain", "plain"},
		},
		{
			name: "all new keys",
			jobs: func(p string) []JobArgs {
				return []JobArgs{WithOptions(testArgs{N: 1}, UniqueKey(p+"a")), WithOptions(testArgs{N: 2}, UniqueKey(p+"b"))}
			},
			want: []string{"new", "new"},
		},
		{
			name: "key held by a pending job",
			setup: func(t *testing.T, q *Queue, _ *fixedClock, p string) map[string]int64 {
				return map[string]int64{"held": newKeyed(t, q, p+"held")}
			},
			jobs: func(p string) []JobArgs {
				return []JobArgs{testArgs{N: 1}, WithOptions(testArgs{N: 2}, UniqueKey(p+"held")), WithOptions(testArgs{N: 3}, UniqueKey(p+"free"))}
			},
			want: []string{"plain", "dup:held", "new"},
		},
		{
			name: "key repeated in the call",
			jobs: func(p string) []JobArgs {
				return []JobArgs{
					WithOptions(testArgs{N: 1}, UniqueKey(p+"r")),
					testArgs{N: 2},
					WithOptions(testArgs{N: 3}, UniqueKey(p+"r")),
					WithOptions(testArgs{N: 4}, UniqueKey(p+"s")),
					WithOptions(testArgs{N: 5}, UniqueKey(p+"r")),
				}
			},
			want: []string{"new", "plain", "dup:#0", "new", "dup:#0"},
		},
		{
			name: "finished job's key is free again",
			setup: func(t *testing.T, q *Queue, _ *fixedClock, p string) map[string]int64 {
				id := newKeyed(t, q, p+"done")
				if err := q.Cancel(context.Background(), id); err != nil {
					t.Fatal(err)
				}
				return map[string]int64{"done": id}
			},
			jobs: func(p string) []JobArgs {
				return []JobArgs{WithOptions(testArgs{N: 1}, UniqueKey(p+"done")), WithOptions(testArgs{N: 2}, UniqueKey(p+"done"))}
			},
			want: []string{"new", "dup:#0"},
		},
		{
			name: "UniqueFor still holds a finished job's key",
			setup: func(t *testing.T, q *Queue, _ *fixedClock, p string) map[string]int64 {
				id := newKeyed(t, q, p+"period", UniqueFor(time.Hour))
				if err := q.Cancel(context.Background(), id); err != nil {
					t.Fatal(err)
				}
				return map[string]int64{"period": id}
			},
			jobs: func(p string) []JobArgs {
				return []JobArgs{WithOptions(testArgs{N: 1}, UniqueKey(p+"period"), UniqueFor(time.Hour))}
			},
			want: []string{"dup:period"},
		},
		{
			name: "UniqueFor ended",
			setup: func(t *testing.T, q *Queue, clock *fixedClock, p string) map[string]int64 {
				id := newKeyed(t, q, p+"lapsed", UniqueFor(time.Minute))
				if err := q.Cancel(context.Background(), id); err != nil {
					t.Fatal(err)
				}
				clock.add(2 * time.Minute)
				return map[string]int64{"lapsed": id}
			},
			jobs: func(p string) []JobArgs {
				return []JobArgs{WithOptions(testArgs{N: 1}, UniqueKey(p+"lapsed"))}
			},
			want: []string{"new"},
		},
	}
	forEachEngine(t, func(t *testing.T, kind engine.Kind) {
		for _, mode := range manyModes {
			t.Run(mode.name, func(t *testing.T) {
				ctx := context.Background()
				env := coreEnv(t, kind)
				var seen []EnqueuedJob
				var opts []Option
				if mode.mw {
					opts = append(opts, WithEnqueueMiddleware(func(ctx context.Context, call *EnqueueCall, next EnqueueFunc) error {
						err := next(ctx, call)
						seen = slices.Clone(call.Jobs)
						return err
					}))
				}
				q, clock := coreQueue(t, env, opts...)
				for ci, c := range cases {
					t.Run(c.name, func(t *testing.T) {
						p := fmt.Sprintf("c%d:", ci)
						held := map[string]int64{}
						if c.setup != nil {
							held = c.setup(t, q, clock, p)
						}
						before := rowCount(t, env)
						args := c.jobs(p)
						seen = nil
						var res []EnqueueResult
						var err error
						if mode.tx {
							var tx *sql.Tx
							if tx, err = env.db.BeginTx(ctx, nil); err != nil {
								t.Fatal(err)
							}
							if res, err = q.EnqueueManyResultsTx(ctx, tx, args); err != nil {
								t.Fatalf("EnqueueManyResultsTx: %v", errors.Join(err, tx.Rollback()))
							}
							if err := tx.Commit(); err != nil {
								t.Fatal(err)
							}
						} else if res, err = q.EnqueueManyResults(ctx, args); err != nil {
							t.Fatalf("EnqueueManyResults: %v", err)
						}
						checkManyResults(t, q, args, c.want, held, res)
						written := 0
						for _, w := range c.want {
							if w == "plain" || w == "new" {
								written++
							}
						}
						if got := rowCount(t, env) - before; got != written {
							t.Errorf("the call wrote %d jobs; want %d", got, written)
						}
						if mode.mw {
							if len(seen) != len(res) {
								t.Fatalf("the middleware saw %d jobs; want %d", len(seen), len(res))
							}
							for i, j := range seen {
								if j.ID != res[i].ID || j.Duplicate != res[i].Duplicate {
									t.Errorf("job %d: the middleware saw id %d duplicate %v; the caller got %+v", i, j.ID, j.Duplicate, res[i])
								}
							}
						}
					})
				}
			})
		}
	})
}

// checkManyResults checks res, the results of enqueuing args, against want
// (see TestEnqueueManyResults), held the ids of the setup's jobs.
func checkManyResults(t *testing.T, q *Queue, args []JobArgs, want []string, held map[string]int64, res []EnqueueResult) {
	t.Helper()
	if len(res) != len(want) {
		t.Fatalf("%d results %+v; want %d", len(res), res, len(want))
	}
	ids := map[int64]int{} // new job's id → its index
	for i, w := range want {
		r := res[i]
		switch {
		case w == "plain":
			if r != (EnqueueResult{}) {
				t.Errorf("job %d (no key) = %+v; want written, no id", i, r)
			}
		case w == "new":
			if r.Duplicate || r.ID <= 0 {
				t.Errorf("job %d = %+v; want written with its id", i, r)
				continue
			}
			if j, ok := ids[r.ID]; ok {
				t.Errorf("jobs %d and %d both got id %d", j, i, r.ID)
			}
			for name, id := range held {
				if r.ID == id {
					t.Errorf("job %d got the id %d of the earlier job %s", i, id, name)
				}
			}
			ids[r.ID] = i
			a, _ := unwrapOptions(args[i], nil)
			var stored testArgs
			got := getJob(t, q, r.ID)
			if got == nil {
				t.Errorf("job %d: id %d is no job", i, r.ID)
				continue
			}
			if err := json.Unmarshal(got.Payload, &stored); err != nil || stored != a.(testArgs) {
				t.Errorf("job %d: id %d is the job of %s (%v); want the job of %+v", i, r.ID, got.Payload, err, a)
			}
		case strings.HasPrefix(w, "dup:#"):
			var at int
			if _, err := fmt.Sscanf(w, "dup:#%d", &at); err != nil {
				t.Fatal(err)
			}
			if !r.Duplicate || r.ID != res[at].ID || res[at].ID == 0 {
				t.Errorf("job %d = %+v; want a duplicate of job %d of the call (%+v)", i, r, at, res[at])
			}
		case strings.HasPrefix(w, "dup:"):
			id := held[strings.TrimPrefix(w, "dup:")]
			if !r.Duplicate || r.ID != id {
				t.Errorf("job %d = %+v; want a duplicate of job %d", i, r, id)
			}
		default:
			t.Fatalf("bad want %q", w)
		}
	}
}

// callerTx runs EnqueueManyResultsTx of args in a transaction of its own
// and commits it.
func callerTx(ctx context.Context, db *sql.DB, q *Queue, args []JobArgs) ([]EnqueueResult, error) {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	res, err := q.EnqueueManyResultsTx(ctx, tx, args)
	if err != nil {
		return nil, errors.Join(err, tx.Rollback())
	}
	return res, tx.Commit()
}

// TestEnqueueManyResultsRace: callers race with EnqueueManyResults (half in
// the queue's own transaction, half in transactions of their own that they
// commit) for the same keys, each call also with a key of its own and a
// job without a key. Exactly one job is written per shared key, and every
// other caller is told it was a duplicate of that job's id.
func TestEnqueueManyResultsRace(t *testing.T) {
	const callers = 8
	shared := []string{"s1", "s2", "s3"}
	forEachEngine(t, func(t *testing.T, kind engine.Kind) {
		ctx := context.Background()
		env := coreEnv(t, kind)
		q, _ := coreQueue(t, env)
		type result struct {
			res []EnqueueResult
			err error
		}
		results := make([]result, callers)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for c := range callers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				args := []JobArgs{testArgs{N: c}}
				for _, k := range shared {
					args = append(args, WithOptions(testArgs{N: c}, UniqueKey(k)))
				}
				args = append(args, WithOptions(testArgs{N: c}, UniqueKey(fmt.Sprintf("own%d", c))))
				<-start
				if c%2 == 0 {
					results[c].res, results[c].err = q.EnqueueManyResults(ctx, args)
					return
				}
				// A caller's transaction that the server ends for a
				// deadlock (MySQL's gap locks on the key index) wrote
				// nothing, and the caller runs it again, as any of its
				// transactions.
				for try := 1; ; try++ {
					results[c].res, results[c].err = callerTx(ctx, env.db, q, args)
					if try == 20 || !retryableTx(results[c].err) {
						return
					}
				}
			}()
		}
		close(start)
		wg.Wait()
		for c, r := range results {
			if r.err != nil {
				t.Fatalf("caller %d: %v", c, r.err)
			}
			if len(r.res) != 2+len(shared) {
				t.Fatalf("caller %d: %d results, want %d", c, len(r.res), 2+len(shared))
			}
			if r.res[0] != (EnqueueResult{}) {
				t.Errorf("caller %d: the job without a key = %+v; want written, no id", c, r.res[0])
			}
			if own := r.res[len(r.res)-1]; own.Duplicate || own.ID <= 0 {
				t.Errorf("caller %d: its own key = %+v; want written", c, own)
			}
		}
		for i, k := range shared {
			var holder int64
			writers := 0
			for _, r := range results {
				if !r.res[1+i].Duplicate {
					writers++
					holder = r.res[1+i].ID
				}
			}
			if writers != 1 || holder <= 0 {
				t.Errorf("key %s: %d callers wrote it (last id %d); want exactly one", k, writers, holder)
				continue
			}
			for c, r := range results {
				if got := r.res[1+i]; got.ID != holder {
					t.Errorf("key %s: caller %d got %+v; want id %d", k, c, got, holder)
				}
			}
			if j := getJob(t, q, holder); j == nil || j.Status != StatusPending {
				t.Errorf("key %s: its holder %d is %+v; want a pending job", k, holder, j)
			}
		}
		if got, want := rowCount(t, env), 2*callers+len(shared); got != want {
			t.Errorf("%d jobs in the table; want %d (one per caller without a key and with its own key, one per shared key)", got, want)
		}
	})
}

// TestEnqueueManyResultsTxOwnJobs: in the caller's transaction the results
// hold for what it sees: a key taken by a job the transaction wrote (not
// committed yet) makes a duplicate of that job; once the transaction
// rolled back the key is free, and a call writes it.
func TestEnqueueManyResultsTxOwnJobs(t *testing.T) {
	forEachEngine(t, func(t *testing.T, kind engine.Kind) {
		ctx := context.Background()
		env := coreEnv(t, kind)
		q, _ := coreQueue(t, env)
		tx, err := env.db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		mine, err := q.EnqueueTx(ctx, tx, testArgs{N: 1}, UniqueKey("t"))
		if err != nil {
			t.Fatal(errors.Join(err, tx.Rollback()))
		}
		res, err := q.EnqueueManyResultsTx(ctx, tx, []JobArgs{WithOptions(testArgs{N: 2}, UniqueKey("t"))})
		if err != nil {
			t.Fatal(errors.Join(err, tx.Rollback()))
		}
		if want := []EnqueueResult{{ID: mine, Duplicate: true}}; !slices.Equal(res, want) {
			t.Errorf("in the transaction that wrote job %d with the key: %+v; want %+v", mine, res, want)
		}
		if err := tx.Rollback(); err != nil {
			t.Fatal(err)
		}
		res, err = q.EnqueueManyResults(ctx, []JobArgs{WithOptions(testArgs{N: 3}, UniqueKey("t"))})
		if err != nil {
			t.Fatal(err)
		}
		if len(res) != 1 || res[0].Duplicate || res[0].ID <= 0 {
			t.Errorf("after the rollback: %+v; want the job written", res)
		}
	})
}
