package queue

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/testdb"
)

// controlFixture enqueues one job in each state on a fresh table: pending,
// running (claimed), completed, failed and expired; missing is an id of
// no job.
type controlFixture struct {
	pending, running, completed, failed, expired, missing int64
	attempt                                               *JobRow // the running job's attempt
}

func newControlFixture(t *testing.T, q *Queue, clock *fixedClock) controlFixture {
	t.Helper()
	ctx := context.Background()
	var f controlFixture
	f.pending = mustEnqueue(t, q, testArgs{N: 1}, Type("p"))
	f.running = mustEnqueue(t, q, testArgs{N: 2}, Type("r"))
	f.attempt = mustClaim(t, q, []string{"r"}, 1, time.Minute)[0]
	f.completed = mustEnqueue(t, q, testArgs{N: 3}, Type("c"))
	c := mustClaim(t, q, []string{"c"}, 1, time.Minute)[0]
	if stale, err := q.complete(ctx, []attemptRef{c.ref()}); err != nil || len(stale) != 0 {
		t.Fatalf("complete = %v, %v", stale, err)
	}
	f.failed = mustEnqueue(t, q, testArgs{N: 4}, Type("f"))
	failForGood(t, q, "f")
	f.expired = mustEnqueue(t, q, testArgs{N: 5}, Type("e"), ExpiresIn(time.Minute))
	clock.add(2 * time.Minute)
	if n, err := q.ExpireOverdue(ctx); err != nil || n != 1 {
		t.Fatalf("ExpireOverdue = %d, %v", n, err)
	}
	f.missing = f.expired + 1<<40
	return f
}

// jobState is job id as Get returns it, printed, or "not found"; any other
// error of Get fails the test.
func jobState(t *testing.T, q *Queue, id int64) string {
	t.Helper()
	row, err := q.Get(context.Background(), id)
	if errors.Is(err, ErrJobNotFound) {
		return "not found"
	}
	if err != nil {
		t.Fatalf("Get(%d): %v", id, err)
	}
	return fmt.Sprintf("%+v", row)
}

// controlCase is a job of a controlFixture and the error that a control
// call (Cancel, Delete) on it returns: nil when the call changes the job.
type controlCase struct {
	name     string
	id       int64
	wantErr  error
	wantText string // what the error also says, beside wantErr's text
}

// checkControlCases runs call, the control method named what, on the job
// of each case, in a subtest: a call that changes the job is checked by
// changed; one that fails must return the case's error and leave the job
// as it was.
func checkControlCases(t *testing.T, q *Queue, what string, call func(context.Context, int64) error, cases []controlCase, changed func(t *testing.T, id int64)) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := jobState(t, q, c.id)
			err := call(context.Background(), c.id)
			if c.wantErr == nil {
				if err != nil {
					t.Fatalf("%s(%d) = %v", what, c.id, err)
				}
				changed(t, c.id)
				return
			}
			if !errors.Is(err, c.wantErr) {
				t.Fatalf("%s(%d) = %v, want %v", what, c.id, err, c.wantErr)
			}
			if !strings.Contains(err.Error(), c.wantText) {
				t.Fatalf("%s(%d) = %v; want an error that says %q", what, c.id, err, c.wantText)
			}
			if after := jobState(t, q, c.id); after != before {
				t.Fatalf("%s(%d) changed the job: %s -> %s", what, c.id, before, after)
			}
		})
	}
}

func TestCancel(t *testing.T) {
	forEachEngine(t, func(t *testing.T, kind engine.Kind) {
		ctx := context.Background()
		env := coreEnv(t, kind)
		q, clock := coreQueue(t, env)
		f := newControlFixture(t, q, clock)

		cases := []controlCase{ // wantErr nil: cancelled
			{name: "pending", id: f.pending},
			{name: "running", id: f.running},
			{name: "completed", id: f.completed, wantErr: ErrJobFinished},
			{name: "failed", id: f.failed, wantErr: ErrJobFinished},
			{name: "expired", id: f.expired, wantErr: ErrJobFinished},
			{name: "missing", id: f.missing, wantErr: ErrJobNotFound},
		}
		checkControlCases(t, q, "Cancel", q.Cancel, cases, func(t *testing.T, id int64) {
			after := getJob(t, q, id)
			if after.Status != StatusFailed || after.Error != "cancelled" || after.FinishedAt == nil ||
				!after.FinishedAt.Equal(clock.now()) || after.ClaimToken != "" || after.LeaseUntil != nil {
				t.Fatalf("cancelled job is %+v", after)
			}
		})

		// The cancelled attempt is fenced off: its completion, failure and
		// heartbeat change nothing.
		if stale, err := q.complete(ctx, []attemptRef{f.attempt.ref()}); err != nil || len(stale) != 1 {
			t.Fatalf("complete of the cancelled attempt = %v, %v; want it stale", stale, err)
		}
		if _, _, err := q.fail(ctx, f.attempt, errors.New("boom")); !errors.Is(err, ErrLeaseLost) {
			t.Fatalf("fail of the cancelled attempt = %v, want ErrLeaseLost", err)
		}
		if lost, err := q.heartbeat(ctx, []attemptRef{f.attempt.ref()}, time.Minute); err != nil || len(lost) != 1 {
			t.Fatalf("heartbeat of the cancelled attempt = %v, %v; want it lost", lost, err)
		}
		if row := getJob(t, q, f.running); row.Status != StatusFailed || row.Error != "cancelled" {
			t.Fatalf("the cancelled attempt changed its job: %+v", row)
		}

		// Retry runs a cancelled job again.
		for _, id := range []int64{f.pending, f.running} {
			if ok, err := q.Retry(ctx, id); err != nil || !ok {
				t.Fatalf("Retry(%d) of a cancelled job = %v, %v", id, ok, err)
			}
		}
		if got := mustClaim(t, q, []string{"p", "r"}, 10, time.Minute); len(got) != 2 {
			t.Fatalf("claimed %d retried cancelled jobs, want 2", len(got))
		}
	})
}

func TestDelete(t *testing.T) {
	forEachEngine(t, func(t *testing.T, kind engine.Kind) {
		ctx := context.Background()
		env := coreEnv(t, kind)
		q, clock := coreQueue(t, env)
		f := newControlFixture(t, q, clock)

		cases := []controlCase{ // wantErr nil: deleted
			{name: "pending", id: f.pending},
			{name: "running", id: f.running, wantErr: ErrJobRunning, wantText: "cancel it first"},
			{name: "completed", id: f.completed},
			{name: "failed", id: f.failed},
			{name: "expired", id: f.expired},
			{name: "missing", id: f.missing, wantErr: ErrJobNotFound},
		}
		checkControlCases(t, q, "Delete", q.Delete, cases, func(t *testing.T, id int64) {
			if _, err := q.Get(ctx, id); !errors.Is(err, ErrJobNotFound) {
				t.Fatalf("Get after Delete(%d) = %v, want ErrJobNotFound", id, err)
			}
		})
		if n := rowCount(t, env); n != 1 {
			t.Fatalf("%d rows left, want the running one", n)
		}
		// Cancel first, then delete.
		if err := q.Cancel(ctx, f.running); err != nil {
			t.Fatal(err)
		}
		if err := q.Delete(ctx, f.running); err != nil {
			t.Fatalf("Delete of the cancelled job = %v", err)
		}
		if n := rowCount(t, env); n != 0 {
			t.Fatalf("%d rows left, want none", n)
		}
	})
}

func TestControlMany(t *testing.T) {
	forEachEngine(t, func(t *testing.T, kind engine.Kind) {
		ctx := context.Background()
		env := coreEnv(t, kind)
		q, clock := coreQueue(t, env)
		f := newControlFixture(t, q, clock)

		ids := []int64{f.completed, f.pending, f.missing, f.running, f.pending}
		res, err := q.CancelMany(ctx, ids)
		if err != nil {
			t.Fatal(err)
		}
		want := []error{ErrJobFinished, nil, ErrJobNotFound, nil, nil}
		checkResults(t, "CancelMany", ids, res, want)

		ids = []int64{f.running, f.failed, f.missing, f.completed}
		res, err = q.DeleteMany(ctx, ids)
		if err != nil {
			t.Fatal(err)
		}
		checkResults(t, "DeleteMany", ids, res, []error{nil, nil, ErrJobNotFound, nil})
		if n := rowCount(t, env); n != 2 { // pending (cancelled) and expired
			t.Fatalf("%d rows left, want 2", n)
		}

		// More ids than one batch: every one gets its result.
		var args []JobArgs
		for i := range controlBatch + 10 {
			args = append(args, testArgs{N: i})
		}
		if _, err := q.EnqueueMany(ctx, args, Type("bulk")); err != nil {
			t.Fatal(err)
		}
		rows, err := q.List(ctx, ListFilter{Type: "bulk", Limit: controlBatch + 10})
		if err != nil || len(rows) != controlBatch+10 {
			t.Fatalf("List = %d rows, %v", len(rows), err)
		}
		ids = ids[:0]
		for _, r := range rows {
			ids = append(ids, r.ID)
		}
		ids = append(ids, f.missing)
		res, err = q.CancelMany(ctx, ids)
		if err != nil {
			t.Fatal(err)
		}
		want = make([]error, len(ids))
		want[len(ids)-1] = ErrJobNotFound
		checkResults(t, "CancelMany of a large batch", ids, res, want)
		if n := env.countWhere(t, "type = 'bulk' AND status = 'failed' AND error = 'cancelled'"); n != controlBatch+10 {
			t.Fatalf("%d bulk jobs cancelled, want %d", n, controlBatch+10)
		}
		res, err = q.DeleteMany(ctx, ids)
		if err != nil {
			t.Fatal(err)
		}
		checkResults(t, "DeleteMany of a large batch", ids, res, want)
		if res, err := q.CancelMany(ctx, nil); err != nil || len(res) != 0 {
			t.Fatalf("CancelMany(nil) = %v, %v", res, err)
		}
	})
}

func checkResults(t *testing.T, what string, ids []int64, res []IDResult, want []error) {
	t.Helper()
	if len(res) != len(ids) {
		t.Fatalf("%s: %d results for %d ids", what, len(res), len(ids))
	}
	for i, r := range res {
		if r.ID != ids[i] {
			t.Fatalf("%s: result %d is for id %d, want %d", what, i, r.ID, ids[i])
		}
		if (want[i] == nil) != (r.Err == nil) || want[i] != nil && !errors.Is(r.Err, want[i]) {
			t.Fatalf("%s: id %d: %v, want %v", what, r.ID, r.Err, want[i])
		}
	}
}

// TestCancelRunningHandler cancels a job whose handler runs: the handler's
// context is cancelled with a cause wrapping ErrLeaseLost (on PostgreSQL
// through NOTIFY: the heartbeat interval there is far longer than the
// test's deadline), at the first heartbeat after the cancel, its result changes nothing, and the job stays failed
// with the error "cancelled"; the worker goes on with other jobs.
func TestCancelRunningHandler(t *testing.T) {
	forEachEngine(t, func(t *testing.T, kind engine.Kind) {
		ctx := context.Background()
		env := newTestEnv(t, kind)
		var sc stmtCounter
		q := env.queue(t, nil, WithLogger(testdb.QuietLogger()), withStatementHook(sc.observe))
		cfg := fastConfig()
		cfg.Lease, cfg.HeartbeatInterval = 3*time.Second, time.Second
		if kind == engine.Postgres {
			cfg.Lease, cfg.HeartbeatInterval = 10*time.Minute, 5*time.Minute
		}
		w := q.NewWorker(cfg)
		started := make(chan int64, 10)
		stopped := make(chan error, 10)
		Handle(w, func(ctx context.Context, job *Job[emailArgs]) error {
			started <- job.ID
			if job.Args.To != "block" {
				return nil
			}
			<-ctx.Done()
			stopped <- context.Cause(ctx)
			return nil // a success that must change nothing
		})
		id := enqueue(t, q, emailArgs{To: "block"})
		stop, _ := startWorker(t, w)
		if got := waitFor(t, started, 20*time.Second, "the handler to start"); got != id {
			t.Fatalf("started job %d, want %d", got, id)
		}
		if err := q.Cancel(ctx, id); err != nil {
			t.Fatal(err)
		}
		sc.reset()
		cause := waitFor(t, stopped, 30*time.Second, "the cancelled handler's context to end")
		// Within one heartbeat: the first heartbeat after the cancel ends
		// the handler (on PostgreSQL the one the notification asks for at
		// once, the interval being far longer than the wait).
		if n := sc.countWith("name: ExtendLeases "); n > 1 {
			t.Errorf("%d heartbeats after the cancel before the handler's context ended; want at most 1", n)
		}
		if !errors.Is(cause, ErrLeaseLost) {
			t.Errorf("the handler's context ended with %v, want a cause wrapping ErrLeaseLost", cause)
		}
		other := enqueue(t, q, emailArgs{To: "other"})
		if got := waitFor(t, started, 20*time.Second, "the next job"); got != other {
			t.Fatalf("next job %d, want %d", got, other)
		}
		waitUntil(t, 10*time.Second, "the other job completed", func() bool { return getJob(t, q, other).Status == StatusCompleted })
		if err := stop(10 * time.Second); err != nil {
			t.Fatal(err)
		}
		if row := getJob(t, q, id); row.Status != StatusFailed || row.Error != "cancelled" || row.ClaimToken != "" {
			t.Errorf("the cancelled job ended %+v", row)
		}
	})
}

func TestCancelPayloads(t *testing.T) {
	var ids []int64
	for i := range 2000 {
		ids = append(ids, int64(1_000_000_000+i))
	}
	payloads := cancelPayloads(ids)
	if len(payloads) < 2 {
		t.Fatalf("%d payloads for 2000 long ids, want them split", len(payloads))
	}
	var back []int64
	for _, p := range payloads {
		if len(p) > maxNotifyPayload {
			t.Errorf("payload of %d bytes", len(p))
		}
		got, ok := parseCancelPayload(p)
		if !ok {
			t.Fatalf("parseCancelPayload(%.40q…) failed", p)
		}
		back = append(back, got...)
	}
	if fmt.Sprint(back) != fmt.Sprint(ids) {
		t.Errorf("the payloads carry other ids")
	}
	for _, p := range []string{"", "default", "jobqueue:cancel:", "jobqueue:cancel:1,x"} {
		if _, ok := parseCancelPayload(p); ok {
			t.Errorf("parseCancelPayload(%q) took it for a cancel", p)
		}
	}
}

// TestCancelAtOnceWhileFinishing: on PostgreSQL a cancelled job's handler
// sees its context cancelled at once (NOTIFY), not at the next heartbeat
// (5 minutes here), also once the worker has stopped claiming and lets its
// running handlers finish: after it claimed its MaxJobs, and during a
// shutdown's grace (ShutdownTimeout). The worker stopped listening when it
// stopped claiming.
func TestCancelAtOnceWhileFinishing(t *testing.T) {
	cases := []struct {
		name      string
		configure func(*WorkerConfig)
		shutdown  bool   // cancel Run's context once the handler runs
		stopped   string // the worker's line saying it stopped claiming
	}{
		{name: "after MaxJobs", configure: func(c *WorkerConfig) { c.MaxJobs = 1 }, stopped: "worker claimed MaxJobs jobs"},
		{name: "shutdown grace", configure: func(c *WorkerConfig) { c.ShutdownTimeout = time.Minute }, shutdown: true, stopped: "waiting for running handlers"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			env := newTestEnv(t, engine.Postgres)
			var logs testdb.LogRecorder
			q := env.queue(t, nil, WithLogger(slog.New(&logs)))
			cfg := fastConfig()
			cfg.Lease, cfg.HeartbeatInterval = 10*time.Minute, 5*time.Minute
			c.configure(&cfg)
			w := q.NewWorker(cfg)
			started := make(chan int64, 1)
			stopped := make(chan error, 1)
			Handle(w, func(ctx context.Context, job *Job[emailArgs]) error {
				started <- job.ID
				<-ctx.Done()
				stopped <- context.Cause(ctx)
				return nil
			})
			id := enqueue(t, q, emailArgs{To: "block"})
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			runDone := make(chan error, 1)
			go func() { runDone <- w.Run(ctx) }()
			waitFor(t, started, 20*time.Second, "the handler to start")
			if c.shutdown {
				cancel() // the worker stops; the handler may run on for ShutdownTimeout
			}
			waitUntil(t, 10*time.Second, "the worker to stop claiming and let its handler finish", func() bool {
				return logs.Count(slog.LevelInfo, c.stopped) > 0
			})
			if err := q.Cancel(context.Background(), id); err != nil {
				t.Fatal(err)
			}
			cause := waitFor(t, stopped, 10*time.Second, "the cancelled handler's context to end (PostgreSQL: at once)")
			if !errors.Is(cause, ErrLeaseLost) {
				t.Errorf("cause %v", cause)
			}
			cancel()
			if err := waitFor(t, runDone, 70*time.Second, "Run to return"); err != nil {
				t.Fatal(err)
			}
		})
	}
}
