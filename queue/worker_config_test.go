package queue

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/testdb"
)

func TestWorkerLimits(t *testing.T) {
	forEachEngine(t, func(t *testing.T, kind engine.Kind) {
		t.Run("MaxJobs", func(t *testing.T) {
			env := newTestEnv(t, kind)
			q := env.queue(t, nil)
			cfg := fastConfig()
			cfg.Concurrency = 3
			cfg.MaxJobs = 4
			w := q.NewWorker(cfg)
			var calls atomic.Int32
			Handle(w, func(ctx context.Context, job *Job[emailArgs]) error { calls.Add(1); return nil })
			for range 10 {
				enqueue(t, q, emailArgs{})
			}
			_, done := startWorker(t, w)
			if err := waitFor(t, done, 30*time.Second, "Run to return after MaxJobs"); err != nil {
				t.Fatalf("Run: %v", err)
			}
			if c := calls.Load(); c != 4 {
				t.Errorf("%d handler calls, want 4", c)
			}
			if n := env.countWhere(t, "status = 'completed'"); n != 4 {
				t.Errorf("%d completed jobs, want 4", n)
			}
			if n := env.countWhere(t, "status = 'pending' AND attempts = 0"); n != 6 {
				t.Errorf("%d untouched pending jobs, want 6", n)
			}
		})
		t.Run("MaxRuntime", func(t *testing.T) {
			env := newTestEnv(t, kind)
			q := env.queue(t, nil)
			cfg := fastConfig()
			cfg.MaxRuntime = 300 * time.Millisecond
			w := q.NewWorker(cfg)
			Handle(w, func(ctx context.Context, job *Job[emailArgs]) error { return nil })
			t0 := time.Now()
			_, done := startWorker(t, w)
			if err := waitFor(t, done, 30*time.Second, "Run to return after MaxRuntime"); err != nil {
				t.Fatalf("Run: %v", err)
			}
			if took := time.Since(t0); took < 300*time.Millisecond {
				t.Errorf("Run returned after %v, before MaxRuntime", took)
			}
		})
	})
}

// TestWorkerWakesAtOnce gives the worker a poll interval of an hour: an
// enqueue in the same process, or the Waker, must wake it.
func TestWorkerWakesAtOnce(t *testing.T) {
	forEachEngine(t, func(t *testing.T, kind engine.Kind) {
		env := newTestEnv(t, kind)
		q := env.queue(t, nil)
		waker := &chanWaker{ch: make(chan struct{}, 1)}
		cfg := fastConfig()
		cfg.PollInterval = time.Hour
		cfg.MaintenanceInterval = -1
		cfg.Waker = waker
		cfg.PollOnly = true // else PostgreSQL's NOTIFY wakes it (notify_postgres_test.go)
		w := q.NewWorker(cfg)
		ran := make(chan int64, 10)
		Handle(w, func(ctx context.Context, job *Job[emailArgs]) error { ran <- job.ID; return nil })
		// A job from another pool (no wake-up) that the first claim takes:
		// once it runs, that claim has returned and the worker, having
		// found less than it asked for, waits for its poll (an hour) or a
		// wake-up.
		other := env.queue(t, env.newPool(t))
		id := enqueue(t, other, emailArgs{})
		startWorker(t, w)
		if got := waitFor(t, ran, 30*time.Second, "the first claim's job"); got != id {
			t.Fatalf("ran job %d, want %d", got, id)
		}

		id = enqueue(t, q, emailArgs{})
		if got := waitFor(t, ran, 30*time.Second, "the enqueue to wake the worker"); got != id {
			t.Errorf("ran job %d, want %d", got, id)
		}

		// A producer elsewhere (another pool, so no in-process wake-up): only
		// the Waker tells the worker.
		id = enqueue(t, other, emailArgs{})
		select {
		case got := <-ran:
			t.Fatalf("job %d ran before any wake-up", got)
		case <-time.After(200 * time.Millisecond):
		}
		waker.ch <- struct{}{}
		if got := waitFor(t, ran, 30*time.Second, "the Waker to wake the worker"); got != id {
			t.Errorf("ran job %d, want %d", got, id)
		}
	})
}

// chanWaker is a Waker driven by the test.
type chanWaker struct{ ch chan struct{} }

func (c *chanWaker) Wakeups() <-chan struct{} { return c.ch }

func TestWorkerConfigErrors(t *testing.T) {
	cases := []struct {
		name string
		cfg  WorkerConfig
		want string
	}{
		{"negative concurrency", WorkerConfig{Concurrency: -1}, "Concurrency"},
		// A mistyped figure took the machine's memory before the first job.
		{"concurrency over the maximum", WorkerConfig{Concurrency: MaxConcurrency + 1}, "Concurrency"},
		{"lease under a second", WorkerConfig{Lease: 500 * time.Millisecond}, "Lease"},
		{"heartbeat not below lease", WorkerConfig{Lease: time.Second, HeartbeatInterval: time.Second}, "HeartbeatInterval"},
		{"negative max jobs", WorkerConfig{MaxJobs: -1}, "MaxJobs"},
		{"negative max runtime", WorkerConfig{MaxRuntime: -time.Second}, "MaxRuntime"},
		// It was accepted, and no job was ever pruned: the maintenance
		// that prunes was off.
		{"retention without maintenance", WorkerConfig{MaintenanceInterval: -1, Retention: time.Hour}, "Retention 1h0m0s needs the maintenance"},
		{"empty type", WorkerConfig{Types: []string{""}}, "type"},
		{"type too long", WorkerConfig{Types: []string{strings.Repeat("t", 65)}}, "type"},
		{"type with NUL", WorkerConfig{Types: []string{"t\x00"}}, "NUL"},
	}
	env := newTestEnv(t, engine.SQLite)
	q := env.queue(t, nil)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := q.NewWorker(tc.cfg)
			Handle(w, func(ctx context.Context, job *Job[emailArgs]) error { return nil })
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			err := w.Run(ctx)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Run: %v; want an error about %s", err, tc.want)
			}
		})
	}
	if _, err := (WorkerConfig{Concurrency: MaxConcurrency}).withDefaults(); err != nil {
		t.Errorf("Concurrency MaxConcurrency: %v", err)
	}
	// Defaults are sensible.
	cfg, err := WorkerConfig{}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Concurrency != DefaultConcurrency || cfg.Lease != DefaultLease || cfg.HeartbeatInterval != DefaultLease/3 || cfg.PollInterval != DefaultPollInterval {
		t.Errorf("defaults: %+v", cfg)
	}
}

func TestHandleRegistration(t *testing.T) {
	env := newTestEnv(t, engine.SQLite)
	q := env.queue(t, nil)
	mustPanic := func(name string, fn func()) {
		t.Helper()
		defer func() {
			if recover() == nil {
				t.Errorf("%s did not panic", name)
			}
		}()
		fn()
	}
	w := q.NewWorker(fastConfig())
	Handle(w, func(ctx context.Context, job *Job[emailArgs]) error { return nil })
	mustPanic("a second handler for a kind", func() {
		Handle(w, func(ctx context.Context, job *Job[badEmailArgs]) error { return nil })
	})
	mustPanic("an empty kind", func() {
		Handle(w, func(ctx context.Context, job *Job[emptyKindArgs]) error { return nil })
	})
	mustPanic("a nil handler", func() { Handle[emailArgs](w, nil) })

	// Registering while Run is in progress is refused.
	var once sync.Once
	started := make(chan struct{})
	w2 := q.NewWorker(fastConfig())
	w2.HandleDefault(func(ctx context.Context, job *JobRow) error { return nil })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w2.Run(ctx) }()
	waitUntil(t, 30*time.Second, "Run to start", func() bool {
		w2.mu.Lock()
		defer w2.mu.Unlock()
		if w2.running {
			once.Do(func() { close(started) })
		}
		return w2.running
	})
	mustPanic("Handle during Run", func() {
		Handle(w2, func(ctx context.Context, job *Job[emailArgs]) error { return nil })
	})
	if err := w2.Run(ctx); err == nil {
		t.Error("a second concurrent Run was accepted")
	}
	cancel()
	if err := waitFor(t, done, 10*time.Second, "Run to stop"); err != nil {
		t.Errorf("Run: %v", err)
	}
}

type emptyKindArgs struct{}

func (emptyKindArgs) Kind() string { return "" }

// TestWorkerTypesConcurrencyAndDeleteOnSuccess checks that a worker takes
// only jobs of its types, never runs more than Concurrency handlers at once,
// and that a queue deleting on success leaves no completed rows.
func TestWorkerTypesConcurrencyAndDeleteOnSuccess(t *testing.T) {
	forEachEngine(t, func(t *testing.T, kind engine.Kind) {
		env := newTestEnv(t, kind)
		events := newEventLog()
		q := env.queue(t, nil, WithDeleteOnSuccess(true), WithListener(events.listen))
		cfg := fastConfig()
		cfg.Types = []string{"mail", "sms"}
		cfg.Concurrency = 3
		w := q.NewWorker(cfg)
		var running, peak atomic.Int32
		// The first handlers wait until all three slots are busy at once,
		// so that the peak shows the worker runs 3 and no more.
		full := make(chan struct{})
		var fullOnce sync.Once
		Handle(w, func(ctx context.Context, job *Job[emailArgs]) error {
			n := running.Add(1)
			defer running.Add(-1)
			for {
				p := peak.Load()
				if n <= p || peak.CompareAndSwap(p, n) {
					break
				}
			}
			if job.Type != "mail" && job.Type != "sms" {
				t.Errorf("worker of types mail, sms ran a job of type %q", job.Type)
			}
			if n == 3 {
				fullOnce.Do(func() { close(full) })
			}
			select {
			case <-full:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		})
		for i := range 12 {
			enqueue(t, q, emailArgs{Retries: i}, Type([]string{"mail", "sms"}[i%2]))
		}
		other := enqueue(t, q, emailArgs{}, Type("push"))
		startWorker(t, w)
		waitUntil(t, 10*time.Second, "the 12 jobs of the worker's types to be done", func() bool {
			return events.count(EventCompleted) == 12
		})
		if p := peak.Load(); p != 3 {
			t.Errorf("at most %d handlers ran at once with Concurrency 3; want 3", p)
		}
		if n := env.countWhere(t, "1 = 1"); n != 1 {
			t.Errorf("%d rows left, want only the job of the other type (completed rows deleted)", n)
		}
		if row := getJob(t, q, other); row.Status != StatusPending || row.Attempts != 0 {
			t.Errorf("job of another type: %s after %d attempts, want pending and untouched", row.Status, row.Attempts)
		}
	})
}

// TestWorkerServesEveryTypeEnqueueAccepts: a type is up to 64 characters
// (VARCHAR(64)), not bytes. WorkerConfig counted bytes, so a worker could
// not be configured for a type of 64 two-byte characters that Enqueue
// accepts, and its jobs were never run.
func TestWorkerServesEveryTypeEnqueueAccepts(t *testing.T) {
	forEachEngine(t, func(t *testing.T, kind engine.Kind) {
		env := newTestEnv(t, kind)
		q := env.queue(t, nil, WithLogger(testdb.QuietLogger()))
		typ := strings.Repeat("é", maxTypeLen)
		id := enqueue(t, q, emailArgs{To: "a"}, Type(typ))
		cfg := fastConfig()
		cfg.Types = []string{typ}
		w := q.NewWorker(cfg)
		ran := make(chan int64, 1)
		Handle(w, func(ctx context.Context, job *Job[emailArgs]) error {
			ran <- job.ID
			return nil
		})
		_, done := startWorker(t, w)
		select {
		case got := <-ran:
			if got != id {
				t.Fatalf("ran job %d, want %d", got, id)
			}
		case err := <-done:
			t.Fatalf("Run returned %v before running the job of type %q", err, typ)
		case <-time.After(10 * time.Second):
			t.Fatal("the job was not run within 10s")
		}
	})
}

// TestWorkerWithMoreSlotsThanOneClaimTakes: one claim takes at most
// maxClaim jobs. A worker with more free slots than that took a full claim
// of maxClaim for a short one ("nothing more is due") and went idle until
// its next poll while jobs were waiting.
func TestWorkerWithMoreSlotsThanOneClaimTakes(t *testing.T) {
	forEachEngine(t, func(t *testing.T, kind engine.Kind) {
		env := newTestEnv(t, kind)
		q := env.queue(t, nil, WithLogger(testdb.QuietLogger()))
		jobs := maxClaim + maxClaim/2
		enqueueSeq(t, q, jobs)
		cfg := fastConfig()
		cfg.Concurrency = maxClaim + maxClaim/2
		cfg.PollInterval = time.Hour // only "work remains" may claim again
		cfg.MaintenanceInterval = -1
		w := q.NewWorker(cfg)
		var ran atomic.Int64
		Handle(w, func(ctx context.Context, job *Job[seqArgs]) error {
			ran.Add(1)
			return nil
		})
		startWorker(t, w)
		waitUntil(t, 15*time.Second, "every job to run", func() bool { return ran.Load() == int64(jobs) })
	})
}
