package queue_test

// Examples of a worker's configuration (Types, MaxJobs, shutdown), of
// listeners, of the leadership and of periodic jobs with RunMissed, on
// SQLite in a temp dir (openExampleQueue, example_more_test.go).

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"
	_ "time/tzdata" // Europe/Paris, whatever zones the machine has

	"github.com/jobqueue/jobqueue/queue"
	"github.com/jobqueue/jobqueue/queue/cron"
)

// A worker takes the jobs of its Types (empty: every type), runs up to
// Concurrency handlers at once, and holds each claimed job for Lease,
// renewed by heartbeats while its handler runs. MaxJobs (or MaxRuntime)
// makes Run return once that many jobs were claimed and have finished, as
// a batch job or a test wants.
func ExampleWorkerConfig() {
	ctx := context.Background()
	q, _, done := openExampleQueue()
	defer done()
	for _, typ := range []string{"email", "sms", "email"} {
		if _, err := q.Enqueue(ctx, SendEmail{To: typ + " user"}, queue.Type(typ)); err != nil {
			log.Fatal(err)
		}
	}

	w := q.NewWorker(queue.WorkerConfig{
		Types:       []string{"email"},
		Concurrency: 4,
		Lease:       time.Minute,
		MaxJobs:     2,
	})
	queue.Handle(w, func(ctx context.Context, job *queue.Job[SendEmail]) error {
		fmt.Printf("job %d of type %s\n", job.ID, job.Type)
		return nil
	})
	if err := w.Run(ctx); err != nil {
		log.Fatal(err)
	}
	stats, err := q.Stats(ctx, "sms")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("sms left pending:", stats[queue.StatusPending])
	// Unordered output:
	// job 1 of type email
	// job 3 of type email
	// sms left pending: 1
}

// When Run's context ends, the worker stops claiming and lets running
// handlers finish for ShutdownTimeout (default 30 seconds; negative: not
// at all). Then it cancels their contexts with a cause wrapping
// ErrWorkerShutdown; an attempt that then returns an error is released, so
// that another worker takes its job at once (a handler that returns nil
// has done its work and completes its job).
func ExampleWorkerConfig_shutdown() {
	q, _, done := openExampleQueue()
	defer done()
	id, err := q.Enqueue(context.Background(), SendEmail{To: "ada@example.com", Subject: "Big report"})
	if err != nil {
		log.Fatal(err)
	}

	ctx, stop := context.WithCancel(context.Background()) // in a service: signal.NotifyContext
	w := q.NewWorker(queue.WorkerConfig{ShutdownTimeout: -1})
	queue.Handle(w, func(ctx context.Context, job *queue.Job[SendEmail]) error {
		stop() // say, SIGTERM during a deploy
		<-ctx.Done()
		fmt.Println("handler cancelled by the shutdown:", errors.Is(context.Cause(ctx), queue.ErrWorkerShutdown))
		return context.Cause(ctx)
	})
	if err := w.Run(ctx); err != nil {
		log.Fatal(err)
	}

	job, err := q.Get(context.Background(), id)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("after Run:", job.Status, "attempts", job.Attempts)
	// Output:
	// handler cancelled by the shutdown: true
	// after Run: pending attempts 1
}

// A listener hears what happens to jobs: claimed, completed, failed (with
// Permanent set when the job will not be retried), lost, reclaimed, and
// the worker's leadership. It runs on the goroutine that caused the event,
// so it must return quickly.
func ExampleWithListener() {
	ctx := context.Background()
	q, _, done := openExampleQueue(queue.WithListener(func(ev queue.Event) {
		switch ev.Kind {
		case queue.EventClaimed:
			fmt.Println("claimed job", ev.Job.ID, "attempt", ev.Job.Attempts)
		case queue.EventFailed:
			fmt.Println("failed job", ev.Job.ID, "permanent", ev.Permanent, "outcome", ev.Outcome, "error", ev.Err)
		}
	}))
	defer done()
	oneAttempt := queue.RetryPolicy{MaxAttempts: 1, BaseDelay: time.Minute, MaxDelay: time.Hour}
	if _, err := q.Enqueue(ctx, SendEmail{To: "ada@example.com"}, queue.Policy(oneAttempt)); err != nil {
		log.Fatal(err)
	}

	w := q.NewWorker(queue.WorkerConfig{MaxJobs: 1})
	queue.Handle(w, func(ctx context.Context, job *queue.Job[SendEmail]) error {
		return errors.New("smtp: connection refused")
	})
	if err := w.Run(ctx); err != nil {
		log.Fatal(err)
	}
	// Output:
	// claimed job 1 attempt 1
	// failed job 1 permanent true outcome failed error smtp: connection refused
}

// Leader reads which worker leads the table's workers (runs the
// maintenance and enqueues the periodic jobs) and since when; nil when no
// worker has led the table yet. A worker gives the leadership up when it
// stops, so that another one takes over at once.
func ExampleQueue_Leader() {
	ctx := context.Background()
	led := make(chan *queue.Leader, 1)
	q, _, done := openExampleQueue(queue.WithListener(func(ev queue.Event) {
		if ev.Kind == queue.EventLeadershipGained {
			select {
			case led <- ev.Leader:
			default: // a listener must not block
			}
		}
	}))
	defer done()

	ld, err := q.Leader(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("before any worker:", ld)

	runCtx, stop := context.WithCancel(ctx)
	ran := make(chan error, 1)
	go func() { ran <- q.NewWorker(queue.WorkerConfig{}).Run(runCtx) }()
	gained := <-led
	ld, err = q.Leader(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("leading:", ld.Active, ld.Holder == gained.Holder, "term", ld.Term)
	stop()
	if err := <-ran; err != nil {
		log.Fatal(err)
	}
	ld, err = q.Leader(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("after it stopped:", ld.Active, ld.Holder == gained.Holder)
	// Output:
	// before any worker: <nil>
	// leading: true true term 1
	// after it stopped: false true
}

// Report is the args of a periodic job.
type Report struct {
	Name string `json:"name"`
}

// Kind names the job.
func (Report) Kind() string { return "report" }

// A periodic job on a cron schedule in a time zone, registered with
// AddPeriodic. Ticks that pass while no worker leads are not made up,
// except the latest one with RunMissed: here the worker starts long after
// the last 03:00 in Paris and runs that tick's report at once. Each tick is
// enqueued once, with a unique key made of the job's name and the tick, so
// every worker of the table can register the same periodic jobs.
func ExampleWorkerConfig_runMissed() {
	q, _, done := openExampleQueue()
	defer done()
	nightly, err := cron.Parse("CRON_TZ=Europe/Paris 0 3 * * *")
	if err != nil {
		log.Fatal(err)
	}

	ctx, stop := context.WithCancel(context.Background())
	w := q.NewWorker(queue.WorkerConfig{Types: []string{"reports"}, RunMissed: true})
	if err := w.AddPeriodic(queue.Periodic("nightly-sales", nightly, Report{Name: "sales"}, queue.Type("reports"))); err != nil {
		log.Fatal(err)
	}
	queue.Handle(w, func(ctx context.Context, job *queue.Job[Report]) error {
		fmt.Println("report", job.Args.Name, "of the tick at",
			job.ScheduledAt.In(nightly.Location()).Format("15:04"), "Paris time")
		stop()
		return nil
	})
	if err := w.Run(ctx); err != nil {
		log.Fatal(err)
	}

	// Registering the name twice is refused.
	err = w.AddPeriodic(queue.Periodic("nightly-sales", nightly, Report{}))
	fmt.Println("same name again refused:", err != nil)
	// Output:
	// report sales of the tick at 03:00 Paris time
	// same name again refused: true
}
