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

// ExampleWorker_Run_otherProcesses shows a worker starting the jobs that
// other processes enqueue at once, not at its next poll. The worker's queue
// here has a pool of its own, as it would in another process, and polls
// once an hour. On PostgreSQL the worker LISTENs, on MySQL it waits on a
// connection that the enqueues interrupt, on SQLite (here, in WAL mode) it
// watches the database file for other connections' commits; each holds a
// connection of the worker's pool. WorkerConfig.PollOnly turns it off.
func ExampleWorker_Run_otherProcesses() {
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
	webDB, workerDB := open(), open() // say, a web process and a worker process
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

	w := workers.NewWorker(queue.WorkerConfig{Types: []string{"email"}, Concurrency: 4, PollInterval: time.Hour})
	sent := make(chan string, 2)
	queue.Handle(w, func(ctx context.Context, job *queue.Job[SendEmail]) error {
		sent <- fmt.Sprintf("sending %q to %s", job.Args.Subject, job.Args.To)
		return nil
	})
	enqueue := func(subject string) {
		if _, err := web.Enqueue(ctx, SendEmail{To: "ada@example.com", Subject: subject}, queue.Type("email")); err != nil {
			log.Fatal(err)
		}
	}
	waitSent := func() {
		select {
		case s := <-sent:
			fmt.Println(s)
		case <-time.After(10 * time.Second):
			fmt.Println("no job started within 10 seconds")
		}
	}
	runCtx, stop := context.WithCancel(ctx)
	ran := make(chan error, 1)
	enqueue("Welcome") // there before the worker: its first claim takes it
	go func() { ran <- w.Run(runCtx) }()
	waitSent()
	enqueue("Your receipt") // the worker is idle now: this wakes it
	waitSent()
	stop()
	if err := <-ran; err != nil {
		log.Fatal(err)
	}
	// Output:
	// sending "Welcome" to ada@example.com
	// sending "Your receipt" to ada@example.com
}
