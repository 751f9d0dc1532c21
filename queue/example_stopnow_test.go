package queue_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/jobqueue/jobqueue/queue"
)

// StopNow cuts a stopping worker's grace short: the running handlers'
// contexts are cancelled at once (cause wrapping ErrWorkerShutdown) rather
// than when ShutdownTimeout has passed, their jobs are released as at the
// end of that timeout, jobs claimed and not started are given back, and
// Run returns. A service makes its first SIGINT or SIGTERM a graceful stop
// (Run's context ends) and its second a hard one (StopNow), as `jobqueue
// work` does.
func ExampleWorker_StopNow() {
	q, _, done := openExampleQueue()
	defer done()
	id, err := q.Enqueue(context.Background(), SendEmail{To: "ada@example.com", Subject: "Big report"})
	if err != nil {
		log.Fatal(err)
	}

	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	w := q.NewWorker(queue.WorkerConfig{ShutdownTimeout: time.Hour})
	// In a service: signal.Notify(signals, os.Interrupt, syscall.SIGTERM).
	signals := make(chan os.Signal, 2)
	go func() {
		<-signals
		stop() // the first: stop claiming, give running handlers an hour
		<-signals
		w.StopNow() // the second: no grace left
	}()
	queue.Handle(w, func(ctx context.Context, job *queue.Job[SendEmail]) error {
		signals <- os.Interrupt // Ctrl-C during a long job,
		signals <- os.Interrupt // and again
		<-ctx.Done()
		fmt.Println("handler cancelled by the shutdown:", errors.Is(context.Cause(ctx), queue.ErrWorkerShutdown))
		return context.Cause(ctx)
	})
	start := time.Now()
	if err := w.Run(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Println("Run returned without waiting an hour:", time.Since(start) < time.Minute)

	job, err := q.Get(context.Background(), id)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("after Run:", job.Status, "attempts", job.Attempts)
	// Output:
	// handler cancelled by the shutdown: true
	// Run returned without waiting an hour: true
	// after Run: pending attempts 1
}
