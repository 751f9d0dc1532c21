package queue

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/testdb"
)

// TestCancelClaimedNotStarted: a job that a worker has claimed but whose
// handler has not started yet (it waits for an executor, in the claimer's
// buffer ahead of the slots or on its way to a free one) never starts once
// a Cancel through the worker's queue has returned, on every engine: the
// executor sees that its queue cancelled the job since the claim and reads
// the job before it starts it. Before, on MySQL and SQLite (and on
// PostgreSQL unless the notification came first) the handler started, and
// was cancelled only at the next heartbeat, up to a third of the lease
// later. The Cancel runs in the listener of the claim's event, which the
// claimer calls after the claim and before it hands the job on.
func TestCancelClaimedNotStarted(t *testing.T) {
	forEachEngine(t, func(t *testing.T, kind engine.Kind) {
		env := newTestEnv(t, kind)
		var q *Queue // set before the worker runs
		cancelled := make(chan error, 1)
		events := newEventLog()
		q = env.queue(t, nil, WithLogger(testdb.QuietLogger()), WithListener(events.listen), WithListener(func(ev Event) {
			if ev.Kind == EventClaimed && ev.Job.Name == (emailArgs{}).Kind() && strings.Contains(string(ev.Job.Payload), `"cancel-me"`) {
				cancelled <- q.Cancel(context.Background(), ev.Job.ID)
			}
		}))
		cfg := fastConfig()
		// Heartbeats far apart: only the start's check can stop the job.
		cfg.Lease, cfg.HeartbeatInterval = 10*time.Minute, 5*time.Minute
		w := q.NewWorker(cfg)
		started := make(chan string, 10)
		Handle(w, func(ctx context.Context, job *Job[emailArgs]) error {
			started <- job.Args.To
			return nil
		})
		id := enqueue(t, q, emailArgs{To: "cancel-me"})
		stop, _ := startWorker(t, w)
		if err := waitFor(t, cancelled, 20*time.Second, "the Cancel of the claimed job"); err != nil {
			t.Fatalf("Cancel of the claimed job = %v", err)
		}
		ev := events.next(t, EventLost, 20*time.Second)
		select {
		case to := <-started:
			t.Fatalf("the handler of job %q started after its Cancel returned", to)
		default:
		}
		if ev.Job.ID != id || ev.Outcome != OutcomeCancelled || ev.Duration != 0 {
			t.Errorf("lost event for job %d, outcome %s, duration %v; want job %d cancelled, never started", ev.Job.ID, ev.Outcome, ev.Duration, id)
		}
		// The worker goes on with other jobs.
		enqueue(t, q, emailArgs{To: "other"})
		if to := waitFor(t, started, 20*time.Second, "the next job"); to != "other" {
			t.Fatalf("started %q, want the other job", to)
		}
		if err := stop(10 * time.Second); err != nil {
			t.Fatal(err)
		}
		if row := getJob(t, q, id); row.Status != StatusFailed || row.Error != cancelError || row.ClaimToken != "" || row.Attempts != 1 {
			t.Errorf("the cancelled job ended %+v; want failed, %q, no token, 1 attempt", row, cancelError)
		}
	})
}

// TestCancelLog: which attempts an executor reads before it starts them:
// those whose job the queue cancelled after their claim's mark, and every
// one claimed before the log forgot ids (it keeps at most maxCancelLog).
func TestCancelLog(t *testing.T) {
	var l cancelLog
	before := l.mark()
	l.record([]int64{1, 2})
	between := l.mark()
	l.record([]int64{3})
	after := l.mark()
	cases := []struct {
		name string
		id   int64
		mark uint64
		want bool
	}{
		{"cancelled after the mark", 1, before, true},
		{"another job", 9, before, false},
		{"cancelled before the mark", 1, between, false},
		{"cancelled after a later mark", 3, between, true},
		{"nothing cancelled since the mark", 3, after, false},
	}
	for _, c := range cases {
		if got := l.maybeCancelled(c.id, c.mark); got != c.want {
			t.Errorf("%s: maybeCancelled(%d, %d) = %v, want %v", c.name, c.id, c.mark, got, c.want)
		}
	}
	// Past its bound the log forgets the ids: an attempt claimed before
	// is read whatever its job, one claimed after is judged as before.
	many := make([]int64, maxCancelLog)
	for i := range many {
		many[i] = int64(100 + i)
	}
	l.record(many)
	full := l.mark()
	l.record([]int64{5})
	if !l.maybeCancelled(9, after) {
		t.Errorf("an attempt claimed before the log forgot ids is not read")
	}
	if l.maybeCancelled(9, full) || !l.maybeCancelled(5, full) {
		t.Errorf("after the log forgot ids, the attempts claimed since are misjudged")
	}
}

// TestCancelRunningHandlerAtOnceInProcess: a Cancel through the Queue of
// the worker that runs the job cancels the handler's context at once (one
// heartbeat statement, asked for by the Cancel), on every engine, not at
// the worker's next scheduled heartbeat: PostgreSQL's notification does
// that only for workers that LISTEN (not PollOnly), MySQL and SQLite had
// nothing. The heartbeat interval here is far longer than the wait.
func TestCancelRunningHandlerAtOnceInProcess(t *testing.T) {
	forEachEngine(t, func(t *testing.T, kind engine.Kind) {
		ctx := context.Background()
		env := newTestEnv(t, kind)
		q := env.queue(t, nil, WithLogger(testdb.QuietLogger()))
		cfg := fastConfig()
		cfg.Lease, cfg.HeartbeatInterval = 10*time.Minute, 5*time.Minute
		cfg.PollOnly = true // no notification on PostgreSQL either
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
		stop, _ := startWorker(t, w)
		if got := waitFor(t, started, 20*time.Second, "the handler to start"); got != id {
			t.Fatalf("started job %d, want %d", got, id)
		}
		if err := q.Cancel(ctx, id); err != nil {
			t.Fatal(err)
		}
		if cause := waitFor(t, stopped, 20*time.Second, "the cancelled handler's context to end"); !errors.Is(cause, ErrLeaseLost) {
			t.Errorf("the handler's context ended with %v, want a cause wrapping ErrLeaseLost", cause)
		}
		if err := stop(10 * time.Second); err != nil {
			t.Fatal(err)
		}
		if row := getJob(t, q, id); row.Status != StatusFailed || row.Error != cancelError {
			t.Errorf("the cancelled job ended %+v", row)
		}
	})
}

// TestCancelElsewhereLongBuffered: a claimed job that waited in the
// worker's buffer for startCheckAfter or longer is read before it starts,
// so that a Cancel from another process (another Queue here) that
// returned meanwhile stops it on every engine, not only at the next
// heartbeat (on MySQL and SQLite the only other way a worker hears of it).
// A job that was not cancelled starts after the read as before.
func TestCancelElsewhereLongBuffered(t *testing.T) {
	cases := []struct {
		name      string
		cancel    bool
		wait      time.Duration // in the buffer, by the queue's clock
		wantRun   bool
		wantState Status
	}{
		{"cancelled elsewhere while it waited long", true, startCheckAfter, false, StatusFailed},
		{"not cancelled, waited long", false, 2 * startCheckAfter, true, StatusCompleted},
	}
	forEachEngine(t, func(t *testing.T, kind engine.Kind) {
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				ctx := context.Background()
				env := coreEnv(t, kind)
				q, clock := coreQueue(t, env)
				other, _ := coreQueue(t, env) // another process's queue
				id := mustEnqueue(t, q, testArgs{N: 1})
				mark := q.cancels.mark()
				rows := mustClaim(t, q, nil, 1, time.Hour)
				if len(rows) != 1 || rows[0].ID != id {
					t.Fatalf("claimed %v, want job %d", rows, id)
				}
				row := rows[0]
				set := newInflightSet()
				ran := false
				ex := &executors{
					q: q, log: testdb.QuietLogger(), dbCtx: ctx,
					handlers: map[string]handlerFunc{"test": func(context.Context, *JobRow) error { ran = true; return nil }},
					attempts: set, released: &releaseList{},
					completer: newCompleter(q, testdb.QuietLogger(), newShutdownBudget(ctx), set, 10),
				}
				ex.work = ex.handle
				actx, cancel := context.WithCancelCause(ctx)
				defer cancel(nil)
				a := &attempt{row: row, ref: row.ref(), ctx: actx, cancel: cancel, leaseEnd: *row.LeaseUntil, cancelMark: mark, claimedAt: clock.now()}
				set.add(a)
				if c.cancel {
					if err := other.Cancel(ctx, id); err != nil {
						t.Fatalf("Cancel: %v", err)
					}
				}
				clock.add(c.wait)
				ex.execute(a)
				flushReleased(ctx, q, ex)
				if ran != c.wantRun {
					t.Fatalf("the handler ran: %v, want %v", ran, c.wantRun)
				}
				if c.wantRun {
					stop := make(chan struct{})
					close(stop)
					ex.completer.run(stop) // writes what was handed over, then returns
				}
				if j := getJob(t, q, id); j.Status != c.wantState || j.Attempts != 1 {
					t.Fatalf("job is %s at %d attempts, want %s at 1", j.Status, j.Attempts, c.wantState)
				}
			})
		}
	})
}
