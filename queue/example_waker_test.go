package queue_test

import (
	"context"
	"database/sql"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/jobqueue/jobqueue/migrations"
	"github.com/jobqueue/jobqueue/queue"
)

// busWaker is a Waker fed by a message bus of the service's own (Redis
// pub/sub, NATS, …); here its publish is a method call.
type busWaker struct{ ch chan struct{} }

// Wakeups returns the channel the worker waits on.
func (b busWaker) Wakeups() <-chan struct{} { return b.ch }

// publish sends a wake-up without blocking: a burst becomes one wake-up.
func (b busWaker) publish() {
	select {
	case b.ch <- struct{}{}:
	default:
	}
}

// A Waker tells an idle worker that jobs may be ready, so that it claims
// at once instead of at its next poll. Here the worker polls once an hour
// and does not listen to the database (PollOnly), as behind a transaction
// pooler; the producer, in another process (its own pool here), publishes
// on the service's bus after each enqueue.
func ExampleWaker() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "jobqueue-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	open := func() *sql.DB {
		db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "app.db")+
			"?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_txlock=immediate")
		if err != nil {
			log.Fatal(err)
		}
		return db
	}
	webDB, workerDB := open(), open()
	defer webDB.Close()
	defer workerDB.Close()
	if err := migrations.Install(ctx, webDB, "jobs"); err != nil {
		log.Fatal(err)
	}
	web, err := queue.New(webDB)
	if err != nil {
		log.Fatal(err)
	}
	defer web.Close()
	workers, err := queue.New(workerDB)
	if err != nil {
		log.Fatal(err)
	}
	defer workers.Close()

	bus := busWaker{ch: make(chan struct{}, 1)}
	w := workers.NewWorker(queue.WorkerConfig{PollOnly: true, PollInterval: time.Hour, Waker: bus})
	sent := make(chan string, 2)
	queue.Handle(w, func(ctx context.Context, job *queue.Job[SendEmail]) error {
		sent <- job.Args.Subject
		return nil
	})
	enqueue := func(subject string) {
		if _, err := web.Enqueue(ctx, SendEmail{To: "ada@example.com", Subject: subject}); err != nil {
			log.Fatal(err)
		}
		bus.publish()
	}
	waitSent := func() {
		select {
		case s := <-sent:
			fmt.Println("sent:", s)
		case <-time.After(10 * time.Second):
			fmt.Println("no job started within 10 seconds")
		}
	}
	runCtx, stop := context.WithCancel(ctx)
	ran := make(chan error, 1)
	go func() { ran <- w.Run(runCtx) }()
	enqueue("Welcome")
	waitSent()
	enqueue("Your receipt") // the worker is idle, its next poll an hour away
	waitSent()
	stop()
	if err := <-ran; err != nil {
		log.Fatal(err)
	}
	// Output:
	// sent: Welcome
	// sent: Your receipt
}
