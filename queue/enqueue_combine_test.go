package queue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/testdb"
)

// TestEnqueueCombined: on PostgreSQL, Enqueues that arrive while
// combineSlots statements of single enqueues run wait and go together in
// one statement; each caller gets the id of its own job; a waiting caller
// whose context ends gets its error and its job is not written; a combined
// statement the server refuses is written job by job, so that only the bad
// job's caller gets an error. A combined statement carries the values of
// its first caller's context, and a job written alone its own caller's,
// but neither is cancelled with them. The first combineSlots inserts are
// held in the statement hook until the others wait.
func TestEnqueueCombined(t *testing.T) {
	t.Parallel()
	env := newTestEnv(t, engine.Postgres)
	var (
		gate     atomic.Pointer[chan struct{}] // closed: inserts pass
		held     atomic.Int32                  // single inserts held at the gate
		combined atomic.Int32                  // combined statements sent
	)
	open := make(chan struct{})
	close(open)
	gate.Store(&open)
	hook := func(query string, _ sqlRunner) {
		switch {
		case strings.Contains(query, "-- name: InsertJobsJSONReturning "):
			combined.Add(1)
		case strings.Contains(query, "-- name: InsertJob ") || strings.Contains(query, "-- name: InsertJobNotify "):
			g := *gate.Load()
			select {
			case <-g:
			default:
				held.Add(1)
				<-g
			}
		}
	}
	q := env.queue(t, nil, WithLogger(testdb.QuietLogger()), withStatementHook(hook))
	ctx := context.Background()
	// The statements of waiting jobs run through batch and single, which
	// record whose context values they carry (the caller's n) and cancel
	// that caller's context before they run.
	type callerKey struct{}
	var (
		seenMu            sync.Mutex
		batchBy, singleBy []int
		cancels           sync.Map // n → the cancel of that caller's context
	)
	seen := func(into *[]int, ctx context.Context) error {
		n, _ := ctx.Value(callerKey{}).(int)
		seenMu.Lock()
		*into = append(*into, n)
		seenMu.Unlock()
		if stop, ok := cancels.Load(n); ok {
			stop.(context.CancelFunc)()
		}
		return ctx.Err()
	}
	batch, single := q.combiner.batch, q.combiner.single
	q.combiner.batch = func(ctx context.Context, jobs []*newJob, now time.Time) ([]int64, error) {
		if err := seen(&batchBy, ctx); err != nil {
			return nil, fmt.Errorf("the combined statement's context ended with its first caller's: %w", err)
		}
		return batch(ctx, jobs, now)
	}
	q.combiner.single = func(ctx context.Context, j *newJob) (int64, error) {
		if err := seen(&singleBy, ctx); err != nil {
			return 0, fmt.Errorf("the statement's context ended with its caller's: %w", err)
		}
		return single(ctx, j)
	}
	waiting := func() int {
		q.combiner.mu.Lock()
		defer q.combiner.mu.Unlock()
		return len(q.combiner.waiting)
	}

	type result struct {
		n   int
		id  int64
		err error
	}
	// phase enqueues combineSlots jobs that are held, then the jobs of
	// args, which wait; cancel ends the context of the job of that index
	// in args (-1: none) while it waits; then it opens the gate.
	phase := func(first int, args []JobArgs, cancel int) []result {
		t.Helper()
		closed := make(chan struct{})
		gate.Store(&closed)
		held.Store(0)
		var wg sync.WaitGroup
		results := make([]result, combineSlots+len(args))
		for i := range combineSlots {
			wg.Add(1)
			go func() {
				defer wg.Done()
				id, err := q.Enqueue(context.WithValue(ctx, callerKey{}, first+i), testArgs{N: first + i})
				results[i] = result{first + i, id, err}
			}()
		}
		waitUntil(t, 20*time.Second, "the first inserts to be held", func() bool { return held.Load() == combineSlots })
		cctx, stop := context.WithCancel(ctx)
		defer stop()
		for i, a := range args {
			wg.Add(1)
			c := ctx
			if i == cancel {
				c = cctx
			}
			c, stopCaller := context.WithCancel(context.WithValue(c, callerKey{}, first+combineSlots+i))
			defer stopCaller()
			cancels.Store(first+combineSlots+i, stopCaller)
			go func() {
				defer wg.Done()
				id, err := q.Enqueue(c, a)
				results[combineSlots+i] = result{first + combineSlots + i, id, err}
			}()
			waitUntil(t, 20*time.Second, fmt.Sprintf("enqueue %d to wait", i), func() bool { return waiting() == i+1 })
		}
		if cancel >= 0 {
			stop()
			waitUntil(t, 20*time.Second, "the cancelled enqueue to leave", func() bool { return waiting() == len(args)-1 })
		}
		close(closed)
		wg.Wait()
		return results
	}
	check := func(results []result, bad, cancelled int) {
		t.Helper()
		for i, r := range results {
			switch {
			case i == bad:
				if !errors.Is(r.err, ErrPayloadRejected) {
					t.Errorf("enqueue %d (a payload the server refuses): %v, want ErrPayloadRejected", i, r.err)
				}
			case i == cancelled:
				if !errors.Is(r.err, context.Canceled) {
					t.Errorf("enqueue %d (cancelled while it waited): %v, want context.Canceled", i, r.err)
				}
				if n := env.countWhere(t, "(payload->>'n')::int = ?", r.n); n != 0 {
					t.Errorf("the cancelled enqueue %d wrote %d jobs, want none", i, n)
				}
			case r.err != nil:
				t.Errorf("enqueue %d: %v", i, r.err)
			default:
				var got testArgs
				if err := json.Unmarshal(getJob(t, q, r.id).Payload, &got); err != nil || got.N != r.n {
					t.Errorf("enqueue %d: id %d holds %s (%v), want n %d", i, r.id, getJob(t, q, r.id).Payload, err, r.n)
				}
			}
		}
	}

	t.Run("combined", func(t *testing.T) {
		args := make([]JobArgs, 6)
		for i := range args {
			args[i] = testArgs{N: 100 + combineSlots + i}
		}
		combined.Store(0)
		batchBy, singleBy = nil, nil
		results := phase(100, args, 2)
		check(results, -1, combineSlots+2)
		if n := combined.Load(); n != 1 {
			t.Errorf("%d combined statements, want 1 (the 5 jobs that waited)", n)
		}
		if want := []int{100 + combineSlots}; !slices.Equal(batchBy, want) || len(singleBy) != 0 {
			t.Errorf("statements carried the values of callers %v (combined) and %v (alone), want %v and none", batchBy, singleBy, want)
		}
	})
	t.Run("refused", func(t *testing.T) {
		args := make([]JobArgs, 5)
		for i := range args {
			args[i] = testArgs{N: 200 + combineSlots + i}
		}
		args[3] = RawArgs{Name: "raw", Payload: json.RawMessage(`[1e1000000]`)} // JSON, but beyond numeric
		before := env.countWhere(t, "true")
		combined.Store(0)
		batchBy, singleBy = nil, nil
		results := phase(200, args, -1)
		check(results, combineSlots+3, -1)
		if n := combined.Load(); n != 1 {
			t.Errorf("%d combined statements, want 1 (refused, then each job alone)", n)
		}
		if n := env.countWhere(t, "true"); n != before+combineSlots+4 {
			t.Errorf("%d jobs written, want %d (all but the refused one)", n-before, combineSlots+4)
		}
		var alone []int
		for i := range args {
			alone = append(alone, 200+combineSlots+i)
		}
		if want := []int{200 + combineSlots}; !slices.Equal(batchBy, want) || !slices.Equal(singleBy, alone) {
			t.Errorf("statements carried the values of callers %v (combined) and %v (alone), want %v and %v", batchBy, singleBy, want, alone)
		}
	})
}
