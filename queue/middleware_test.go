package queue

// Tests of the middleware (middleware.go) and of the outcome of each
// attempt heard by listeners (Event.Outcome, EventLost), on the three
// engines.

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/testdb"

	"github.com/google/go-cmp/cmp"
)

// mwJob is the job of the middleware tests; What says what its handler does.
type mwJob struct {
	What string `json:"what"`
}

func (mwJob) Kind() string { return "mw" }

type ctxKey struct{}

// TestWorkMiddleware: the queue's middleware wraps the worker's, in the
// order given; a context passed to next reaches the handler; a middleware's
// error fails the attempt without the handler; a handler's panic reaches
// the middleware as a *PanicError; a middleware's panic fails the attempt
// and the worker goes on.
func TestWorkMiddleware(t *testing.T) {
	forEachEngine(t, func(t *testing.T, kind engine.Kind) {
		ctx := context.Background()
		env := coreEnv(t, kind)
		var mu sync.Mutex
		var trace []string
		var panics []any
		note := func(s string) { mu.Lock(); trace = append(trace, s); mu.Unlock() }
		named := func(name string) WorkMiddleware {
			return func(ctx context.Context, job *JobRow, next WorkFunc) error {
				var what mwJob
				if err := (JSONCodec{}).Unmarshal(job.Payload, &what); err != nil {
					return err
				}
				if what.What == "panic-in-mw" && name == "B" {
					panic("middleware broke")
				}
				if what.What == "refuse" && name == "C" {
					note("C refuses")
					return Permanent(errors.New("refused by middleware"))
				}
				note(name + ">")
				err := next(context.WithValue(ctx, ctxKey{}, name), job)
				var pe *PanicError
				if errors.As(err, &pe) {
					mu.Lock()
					panics = append(panics, pe.Value)
					mu.Unlock()
				}
				note("<" + name)
				return err
			}
		}
		events := newEventLog()
		q := env.queue(t, nil, WithLogger(testdb.QuietLogger()), WithListener(events.listen),
			WithWorkMiddleware(named("A")), WithWorkMiddleware(named("B")))
		ids := map[string]int64{}
		for _, what := range []string{"ok", "refuse", "panic", "panic-in-mw"} {
			id, err := q.Enqueue(ctx, mwJob{What: what}, Policy(RetryPolicy{MaxAttempts: 1, BaseDelay: time.Second, MaxDelay: time.Second}))
			if err != nil {
				t.Fatal(err)
			}
			ids[what] = id
		}
		w := q.NewWorker(WorkerConfig{Concurrency: 1, MaxJobs: len(ids), Middleware: []WorkMiddleware{named("C")}})
		Handle(w, func(ctx context.Context, job *Job[mwJob]) error {
			note(fmt.Sprintf("handler(%v)", ctx.Value(ctxKey{})))
			if job.Args.What == "panic" {
				panic("handler broke")
			}
			return nil
		})
		if err := w.Run(ctx); err != nil {
			t.Fatal(err)
		}
		want := []string{
			"A>", "B>", "C>", "handler(C)", "<C", "<B", "<A", // ok
			"A>", "B>", "C refuses", "<B", "<A", // refuse
			"A>", "B>", "C>", "handler(C)", "<C", "<B", "<A", // panic
			"A>", "<A", // panic-in-mw: B panics, A sees it as an error
		}
		if !slices.Equal(trace, want) {
			t.Errorf("calls =\n%q\nwant\n%q", trace, want)
		}
		// The handler's panic was seen by C, B and A; B's own panic by A.
		if want := []any{"handler broke", "handler broke", "handler broke", "middleware broke"}; !slices.Equal(panics, want) {
			t.Errorf("panics seen by the middleware = %v, want %v", panics, want)
		}
		for what, want := range map[string]struct {
			status Status
			err    string
		}{
			"ok":          {StatusCompleted, ""},
			"refuse":      {StatusFailed, "refused by middleware"},
			"panic":       {StatusFailed, "jobqueue: handler panicked: handler broke"},
			"panic-in-mw": {StatusFailed, "jobqueue: handler panicked: middleware broke"},
		} {
			if got := getJob(t, q, ids[what]); got.Status != want.status || got.Error != want.err {
				t.Errorf("job %q: status %s, error %q; want %s, %q", what, got.Status, got.Error, want.status, want.err)
			}
		}
		if n := events.count(EventFailed); n != 3 {
			t.Errorf("EventFailed heard %d times, want 3", n)
		}
	})
}

// TestWorkChainAllocs: the chain adds no allocation per attempt, with or
// without middleware.
func TestWorkChainAllocs(t *testing.T) {
	handler := func(ctx context.Context, job *JobRow) error { return nil }
	pass := func(ctx context.Context, job *JobRow, next WorkFunc) error { return next(ctx, job) }
	for _, tc := range []struct {
		name string
		mw   []WorkMiddleware
	}{{"none", nil}, {"two", []WorkMiddleware{pass, pass}}} {
		t.Run(tc.name, func(t *testing.T) {
			chain := workChain(testdb.QuietLogger(), tc.mw, handler)
			ctx, row := context.Background(), &JobRow{ID: 1}
			if n := testing.AllocsPerRun(100, func() {
				if err := chain(ctx, row); err != nil {
					t.Fatal(err)
				}
			}); n != 0 {
				t.Errorf("%v allocations per attempt, want 0", n)
			}
		})
	}
}

// TestEnqueueMiddleware: every enqueue path goes through the middleware
// once, in order, with its jobs checked; after next the ids and duplicates
// are set; a middleware that refuses writes nothing.
func TestEnqueueMiddleware(t *testing.T) {
	forEachEngine(t, func(t *testing.T, kind engine.Kind) {
		ctx := context.Background()
		env := coreEnv(t, kind)
		var mu sync.Mutex
		var seen []string
		record := func(ctx context.Context, call *EnqueueCall, next EnqueueFunc) error {
			if call.Jobs[0].Kind == "refused" {
				return errors.New("not today")
			}
			err := next(ctx, call)
			mu.Lock()
			defer mu.Unlock()
			for _, j := range call.Jobs {
				seen = append(seen, fmt.Sprintf("%s/%s many=%t tx=%t id=%t dup=%t err=%v",
					j.Kind, j.Type, call.Many, call.Tx != nil, j.ID > 0, j.Duplicate, err != nil))
			}
			return err
		}
		outer := 0
		count := func(ctx context.Context, call *EnqueueCall, next EnqueueFunc) error {
			outer++
			return next(ctx, call)
		}
		q, _ := coreQueue(t, env, WithEnqueueMiddleware(count, record))

		id1, err := q.Enqueue(ctx, RawArgs{Name: "one"}, Type("a"), UniqueKey("k"))
		if err != nil {
			t.Fatal(err)
		}
		dupID, err := q.Enqueue(ctx, RawArgs{Name: "one"}, Type("a"), UniqueKey("k"))
		if !errors.Is(err, ErrDuplicate) || dupID != id1 {
			t.Errorf("duplicate Enqueue = %d, %v; want %d, ErrDuplicate", dupID, err, id1)
		}
		tx, err := env.db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := q.EnqueueTx(ctx, tx, RawArgs{Name: "tx"}); err != nil {
			t.Fatal(err)
		}
		if n, err := q.EnqueueManyTx(ctx, tx, []JobArgs{RawArgs{Name: "mtx"}, RawArgs{Name: "mtx"}}, Type("b")); err != nil || n != 2 {
			t.Fatalf("EnqueueManyTx = %d, %v", n, err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		n, err := q.EnqueueMany(ctx, []JobArgs{RawArgs{Name: "many"}, WithOptions(RawArgs{Name: "many"}, UniqueKey("k"))}, Type("c"))
		if err != nil || n != 1 {
			t.Fatalf("EnqueueMany = %d, %v; want 1 (one duplicate)", n, err)
		}
		if _, err := q.Enqueue(ctx, RawArgs{Name: "refused"}); err == nil || !strings.Contains(err.Error(), "not today") {
			t.Errorf("refused Enqueue: err %v, want the middleware's", err)
		}
		if _, err := q.Enqueue(ctx, RawArgs{Name: ""}); !errors.Is(err, ErrInvalidJob) {
			t.Errorf("invalid Enqueue: err %v, want ErrInvalidJob before the middleware", err)
		}
		want := []string{
			"one/a many=false tx=false id=true dup=false err=false",
			"one/a many=false tx=false id=true dup=true err=true",
			"tx/default many=false tx=true id=true dup=false err=false",
			"mtx/b many=true tx=true id=false dup=false err=false",
			"mtx/b many=true tx=true id=false dup=false err=false",
			"many/c many=true tx=false id=false dup=false err=false",
			"many/c many=true tx=false id=true dup=true err=false", // the key's holder
		}
		if !slices.Equal(seen, want) {
			t.Errorf("middleware saw\n%q\nwant\n%q", seen, want)
		}
		if outer != 6 {
			t.Errorf("outer middleware called %d times, want 6 (the invalid job never reaches it)", outer)
		}
		if got := env.countWhere(t, "1=1"); got != 5 {
			t.Errorf("table holds %d jobs, want 5", got)
		}
		if got := env.countWhere(t, "name = ?", "refused"); got != 0 {
			t.Errorf("the refused job was written %d times", got)
		}
	})
}

// TestEnqueueMiddlewareOwnCall: a middleware that passes next a call of its
// own making gets a clear error and nothing is written.
func TestEnqueueMiddlewareOwnCall(t *testing.T) {
	forEachEngine(t, func(t *testing.T, kind engine.Kind) {
		env := coreEnv(t, kind)
		q, _ := coreQueue(t, env, WithEnqueueMiddleware(func(ctx context.Context, call *EnqueueCall, next EnqueueFunc) error {
			return next(ctx, &EnqueueCall{Jobs: call.Jobs})
		}))
		if _, err := q.Enqueue(context.Background(), RawArgs{Name: "x"}); !errors.Is(err, errNoWrite) {
			t.Errorf("err %v, want errNoWrite", err)
		}
		if got := env.countWhere(t, "1=1"); got != 0 {
			t.Errorf("table holds %d jobs, want 0", got)
		}
	})
}

// TestEventOutcomes: each attempt's end is heard with its outcome, and the
// outcomes match the table: completed, retried, failed, expired, and, for
// attempts fenced off from their jobs (EventLost), cancelled (the handler
// returns at once, or waits until its context is cancelled) and lost.
// Every listener added with WithListener hears every event.
func TestEventOutcomes(t *testing.T) {
	forEachEngine(t, func(t *testing.T, kind engine.Kind) {
		ctx := context.Background()
		env := coreEnv(t, kind)
		clock := &testClock{}
		var mu sync.Mutex
		outcomes := map[int64][]Outcome{}
		heard := 0
		q := env.queue(t, nil, WithLogger(testdb.QuietLogger()), withClock(clock.now),
			WithListener(func(ev Event) {
				switch ev.Kind {
				case EventCompleted, EventFailed, EventLost:
					mu.Lock()
					outcomes[ev.Job.ID] = append(outcomes[ev.Job.ID], ev.Outcome)
					mu.Unlock()
				}
			}),
			WithListener(func(ev Event) {
				if ev.Kind == EventClaimed {
					mu.Lock()
					heard++
					mu.Unlock()
				}
			}))
		one := Policy(RetryPolicy{MaxAttempts: 1, BaseDelay: time.Second, MaxDelay: time.Second})
		two := Policy(RetryPolicy{MaxAttempts: 2, BaseDelay: time.Hour, MaxDelay: time.Hour})
		// A case that jumps the queue's clock runs alone (after the others
		// have finished): the jump would pass the leases of the jobs in
		// flight or claimed ahead beside it and make them lost.
		cases := []struct {
			what      string
			opts      []EnqueueOption
			want      Outcome
			status    Status
			jumpClock bool
		}{
			{"ok", nil, OutcomeCompleted, StatusCompleted, false},
			{"error", []EnqueueOption{two}, OutcomeRetried, StatusPending, false},
			{"error-last", []EnqueueOption{one}, OutcomeFailed, StatusFailed, false},
			{"expire", []EnqueueOption{ExpiresIn(time.Minute)}, OutcomeExpired, StatusExpired, true},
			{"cancel", nil, OutcomeCancelled, StatusFailed, false},
			{"cancel-wait", nil, OutcomeCancelled, StatusFailed, false},
			{"steal", nil, OutcomeLost, StatusInProgress, false},
		}
		handler := func(ctx context.Context, job *Job[mwJob]) error {
			switch job.Args.What {
			case "error", "error-last":
				return errors.New("broke")
			case "expire":
				clock.advance(2 * time.Minute) // its deadline passes while it runs
				return errors.New("too late")
			case "cancel":
				return q.Cancel(ctx, job.ID)
			case "cancel-wait":
				if err := q.Cancel(ctx, job.ID); err != nil {
					return err
				}
				<-ctx.Done() // within a heartbeat (at once on PostgreSQL)
				return context.Cause(ctx)
			case "steal":
				// Another attempt holds the job now.
				env.exec(t, "UPDATE {t} SET claim_token = ? WHERE id = ?", "other-"+fmt.Sprint(job.ID), job.ID)
			}
			return nil
		}
		ids := map[string]int64{}
		for _, jumpClock := range []bool{false, true} {
			n := 0
			for _, c := range cases {
				if c.jumpClock != jumpClock {
					continue
				}
				id, err := q.Enqueue(ctx, mwJob{What: c.what}, c.opts...)
				if err != nil {
					t.Fatal(err)
				}
				ids[c.what] = id
				n++
			}
			// No maintenance: after the clock's jump, a leader's pass would
			// reclaim the "steal" job, whose lease has passed by that clock
			// (CI saw it pending once).
			w := q.NewWorker(WorkerConfig{Concurrency: 2, MaxJobs: n, Lease: 3 * time.Second, MaintenanceInterval: -1})
			Handle(w, handler)
			if err := w.Run(ctx); err != nil {
				t.Fatal(err)
			}
		}
		mu.Lock()
		defer mu.Unlock()
		for _, c := range cases {
			if got := outcomes[ids[c.what]]; !slices.Equal(got, []Outcome{c.want}) {
				t.Errorf("job %q: outcomes heard %v, want [%s]", c.what, got, c.want)
			}
			if got := getJob(t, q, ids[c.what]); got.Status != c.status {
				t.Errorf("job %q: status %s, want %s", c.what, got.Status, c.status)
			}
		}
		if heard != len(cases) {
			t.Errorf("the second listener heard %d claims, want %d", heard, len(cases))
		}
	})
}

// TestReleasedAttemptOutcome: an attempt the shutdown interrupts and
// releases is heard as an EventFailed with its outcome (retried, or failed
// when it was the last attempt) and an error wrapping ErrWorkerShutdown,
// as the table says.
func TestReleasedAttemptOutcome(t *testing.T) {
	forEachEngine(t, func(t *testing.T, kind engine.Kind) {
		ctx := context.Background()
		env := coreEnv(t, kind)
		events := newEventLog()
		q := env.queue(t, nil, WithLogger(testdb.QuietLogger()), WithListener(events.listen))
		again, err := q.Enqueue(ctx, mwJob{What: "again"})
		if err != nil {
			t.Fatal(err)
		}
		last, err := q.Enqueue(ctx, mwJob{What: "last"}, Policy(RetryPolicy{MaxAttempts: 1, BaseDelay: time.Second, MaxDelay: time.Second}))
		if err != nil {
			t.Fatal(err)
		}
		started := make(chan struct{}, 2)
		w := q.NewWorker(WorkerConfig{Concurrency: 2, ShutdownTimeout: -1, MaintenanceInterval: -1})
		Handle(w, func(ctx context.Context, job *Job[mwJob]) error {
			started <- struct{}{}
			<-ctx.Done()
			return context.Cause(ctx)
		})
		stop, _ := startWorker(t, w)
		waitFor(t, started, 10*time.Second, "the first handler")
		waitFor(t, started, 10*time.Second, "the second handler")
		if err := stop(10 * time.Second); err != nil {
			t.Fatal(err)
		}
		want := map[int64]struct {
			outcome Outcome
			status  Status
		}{again: {OutcomeRetried, StatusPending}, last: {OutcomeFailed, StatusFailed}}
		heard := map[int64]Event{}
		for range 2 {
			ev := events.next(t, EventFailed, 10*time.Second)
			heard[ev.Job.ID] = ev
		}
		for id, w := range want {
			ev := heard[id]
			if ev.Outcome != w.outcome || ev.Job.Status != w.status || !errors.Is(ev.Err, ErrWorkerShutdown) {
				t.Errorf("job %d: heard outcome %q, status %s, err %v; want %s, %s, ErrWorkerShutdown", id, ev.Outcome, ev.Job.Status, ev.Err, w.outcome, w.status)
			}
			if got := getJob(t, q, id); got.Status != w.status {
				t.Errorf("job %d is %s in the table, want %s", id, got.Status, w.status)
			}
		}
	})
}

// TestEnqueueCallJobsInOrderGiven: EnqueueCall.Jobs are the jobs in the
// order given, each with its Duplicate set after next, also when only some
// jobs of an EnqueueMany have a unique key. They came unkeyed first, so a
// middleware matching Jobs[i] to args[i] took the wrong job's result.
func TestEnqueueCallJobsInOrderGiven(t *testing.T) {
	forEachEngine(t, func(t *testing.T, kind engine.Kind) {
		ctx := context.Background()
		env := coreEnv(t, kind)
		var seen []EnqueuedJob
		q, _ := coreQueue(t, env, WithEnqueueMiddleware(func(ctx context.Context, call *EnqueueCall, next EnqueueFunc) error {
			err := next(ctx, call)
			seen = append([]EnqueuedJob(nil), call.Jobs...)
			return err
		}))
		if _, err := q.Enqueue(ctx, testArgs{N: 1}, UniqueKey("k")); err != nil {
			t.Fatal(err)
		}
		n, err := q.EnqueueMany(ctx, []JobArgs{
			testArgs{N: 2},
			WithOptions(testArgs{N: 3}, UniqueKey("k")), // a duplicate
			testArgs{N: 4},
			WithOptions(testArgs{N: 5}, UniqueKey("free")),
		})
		if err != nil || n != 3 {
			t.Fatalf("EnqueueMany = %d, %v; want 3", n, err)
		}
		var got []string
		for _, j := range seen {
			got = append(got, fmt.Sprintf("%s dup=%v", j.Payload, j.Duplicate))
		}
		want := []string{`{"n":2} dup=false`, `{"n":3} dup=true`, `{"n":4} dup=false`, `{"n":5} dup=false`}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("call.Jobs, in the order given (-want +got):\n%s", diff)
		}
	})
}

// TestEnqueueMiddlewareSkipsNext: an enqueue whose middleware returns nil
// without calling next wrote nothing, and says so with an error
// (errSkippedWrite), on each of Enqueue, EnqueueTx, EnqueueMany and
// EnqueueManyTx. Before, Enqueue returned id 0 and EnqueueMany 0 jobs with
// a nil error, and the caller believed its job written. A middleware that
// calls next twice has its jobs written once: the second call writes
// nothing and returns errNextTwice (before, it wrote every job again).
func TestEnqueueMiddlewareSkipsNext(t *testing.T) {
	refusal := errors.New("refused by the middleware")
	passes := func(ctx context.Context, call *EnqueueCall, next EnqueueFunc) error { return next(ctx, call) }
	skips := func(context.Context, *EnqueueCall, EnqueueFunc) error { return nil }
	twice := func(ctx context.Context, call *EnqueueCall, next EnqueueFunc) error {
		if err := next(ctx, call); err != nil {
			return err
		}
		return next(ctx, call)
	}
	mws := []struct {
		name    string
		mw      []EnqueueMiddleware
		wantErr error // nil: no error
		written bool  // the jobs are written (once)
	}{
		{"calls next", []EnqueueMiddleware{passes}, nil, true},
		{"returns nil without calling next", []EnqueueMiddleware{skips}, errSkippedWrite, false},
		{"inner one returns nil without calling next", []EnqueueMiddleware{passes, skips}, errSkippedWrite, false},
		{"swallows the error of a call of its own", []EnqueueMiddleware{func(ctx context.Context, call *EnqueueCall, next EnqueueFunc) error {
			_ = next(ctx, &EnqueueCall{Jobs: call.Jobs}) // errNoWrite, dropped on purpose: the case under test
			return nil
		}}, errSkippedWrite, false},
		{"refuses with an error of its own", []EnqueueMiddleware{func(context.Context, *EnqueueCall, EnqueueFunc) error { return refusal }}, refusal, false},
		{"calls next twice", []EnqueueMiddleware{twice}, errNextTwice, true},
		{"inner one calls next twice", []EnqueueMiddleware{passes, twice}, errNextTwice, true},
		{"calls next twice, drops the second error", []EnqueueMiddleware{func(ctx context.Context, call *EnqueueCall, next EnqueueFunc) error {
			err := next(ctx, call)
			_ = next(ctx, call) // errNextTwice, dropped on purpose: the case under test
			return err
		}}, nil, true},
	}
	// Each call enqueues jobs named name and returns how many it says it
	// wrote (Enqueue: 1 when its id is not 0).
	calls := []struct {
		name string
		call func(ctx context.Context, q *Queue, tx *sql.Tx, name string) (int, error)
		tx   bool
	}{
		{"Enqueue", func(ctx context.Context, q *Queue, _ *sql.Tx, name string) (int, error) {
			id, err := q.Enqueue(ctx, RawArgs{Name: name})
			return min(int(id), 1), err
		}, false},
		{"EnqueueTx", func(ctx context.Context, q *Queue, tx *sql.Tx, name string) (int, error) {
			id, err := q.EnqueueTx(ctx, tx, RawArgs{Name: name})
			return min(int(id), 1), err
		}, true},
		{"EnqueueMany", func(ctx context.Context, q *Queue, _ *sql.Tx, name string) (int, error) {
			return q.EnqueueMany(ctx, []JobArgs{RawArgs{Name: name}, RawArgs{Name: name}})
		}, false},
		{"EnqueueManyTx", func(ctx context.Context, q *Queue, tx *sql.Tx, name string) (int, error) {
			return q.EnqueueManyTx(ctx, tx, []JobArgs{RawArgs{Name: name}, RawArgs{Name: name}})
		}, true},
	}
	forEachEngine(t, func(t *testing.T, kind engine.Kind) {
		env := coreEnv(t, kind)
		for i, m := range mws {
			q, _ := coreQueue(t, env, WithEnqueueMiddleware(m.mw...))
			for j, c := range calls {
				t.Run(m.name+"/"+c.name, func(t *testing.T) {
					ctx := context.Background()
					name := fmt.Sprintf("case-%d-%d", i, j)
					var tx *sql.Tx
					if c.tx {
						var err error
						if tx, err = env.db.BeginTx(ctx, nil); err != nil {
							t.Fatal(err)
						}
					}
					n, err := c.call(ctx, q, tx, name)
					if tx != nil {
						if cerr := tx.Commit(); cerr != nil {
							t.Fatalf("commit: %v", cerr)
						}
					}
					written := env.countWhere(t, "name = ?", name)
					if !errors.Is(err, m.wantErr) { // errors.Is(err, nil): err == nil
						t.Errorf("err %v, want %v", err, m.wantErr)
					}
					want := 0
					if m.written {
						want = 1 // Enqueue, EnqueueTx: the id is not 0
						if strings.HasPrefix(c.name, "EnqueueMany") {
							want = 2
						}
					}
					if n != want || written != want {
						t.Errorf("returned %d written, table holds %d; want %d and %d", n, written, want, want)
					}
				})
			}
		}
	})
}
