package queue_test

import (
	"context"
	"database/sql"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	_ "modernc.org/sqlite"

	"github.com/jobqueue/jobqueue/migrations"
	"github.com/jobqueue/jobqueue/queue"
	"github.com/jobqueue/jobqueue/queue/cron"
)

// Cleanup is the args of a periodic job.
type Cleanup struct{}

// Kind names the job.
func (Cleanup) Kind() string { return "cleanup" }

// ExamplePeriodic registers a periodic job on a worker. Of all the workers
// of the table, the one that leads enqueues each tick once (here every
// second; cron.Parse also takes "0 3 * * *", "@daily" or
// "CRON_TZ=Europe/Paris 0 3 * * *"); any worker of the job's type runs it.
func ExamplePeriodic() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "jobqueue-periodic-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "app.db")+
		"?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_txlock=immediate")
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	if err := migrations.Install(ctx, db, "jobs"); err != nil { // also creates jobs_leader and jobs_unique
		log.Fatal(err)
	}

	var gained atomic.Int32
	q, err := queue.New(db, queue.WithListener(func(ev queue.Event) {
		if ev.Kind == queue.EventLeadershipGained {
			gained.Add(1)
		}
	}))
	if err != nil {
		log.Fatal(err)
	}
	defer q.Close()

	schedule, err := cron.Parse("@every 1s") // a malformed schedule is an error here
	if err != nil {
		log.Fatal(err)
	}
	w := q.NewWorker(queue.WorkerConfig{
		Types:     []string{"maintenance"},
		Periodic:  []queue.PeriodicJob{queue.Periodic("cleanup", schedule, Cleanup{}, queue.Type("maintenance"))},
		Retention: 30 * 24 * time.Hour, // the leader also prunes jobs finished over 30 days ago
	})
	ctx, stop := context.WithCancel(ctx)
	queue.Handle(w, func(ctx context.Context, job *queue.Job[Cleanup]) error {
		fmt.Println("cleanup of the tick at a whole second:", job.ScheduledAt.Equal(job.ScheduledAt.Truncate(time.Second)))
		stop()
		return nil
	})
	if err := w.Run(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Println("the worker led:", gained.Load() > 0)

	// It gave the lease up when it stopped, so another worker takes over
	// at once. Queue.Leader (jobqueue leader) shows who leads.
	ld, err := q.Leader(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("a leader now:", ld.Active)
	// Output:
	// cleanup of the tick at a whole second: true
	// the worker led: true
	// a leader now: false
}
