package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/jobqueue/jobqueue/migrations"
	"github.com/jobqueue/jobqueue/queue"
)

// demoTable is the table the demo uses unless --table is given: a table of
// its own, emptied at the start of every run.
const demoTable = "jobqueue_demo"

// demoPolicy is the retry policy of the demo's jobs: backoff shortened so
// that retries happen within seconds (1 s, then 2 s).
func demoPolicy() queue.RetryPolicy {
	return queue.RetryPolicy{MaxAttempts: 3, BaseDelay: time.Second, MaxDelay: 2 * time.Second}
}

// The demo's job types: typed args with a Kind, as a Go service writes them.

// SendEmail sends an email.
type SendEmail struct {
	To      string `json:"to"`
	Subject string `json:"subject"`
}

// Kind names the job.
func (SendEmail) Kind() string { return "send_email" }

// ResizeImage makes a thumbnail; the demo's thumbnail service times out on
// the first attempt.
type ResizeImage struct {
	URL   string `json:"url"`
	Width int    `json:"width"`
}

// Kind names the job.
func (ResizeImage) Kind() string { return "resize_image" }

// ChargeCard charges a card; the demo's cards are always declined.
type ChargeCard struct {
	Customer string `json:"customer"`
	Cents    int    `json:"cents"`
}

// Kind names the job.
func (ChargeCard) Kind() string { return "charge_card" }

// FlashSale announces a sale that is only worth announcing before it ends.
type FlashSale struct {
	Item string `json:"item"`
}

// Kind names the job.
func (FlashSale) Kind() string { return "flash_sale" }

func (a *app) demoCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "demo",
		Short: "Show the whole life of jobs: enqueue, run, retry, schedule, expire (about 5 s)",
		Long: `demo shows the whole life of jobs on the embedded SQLite default (or --db) in a
table of its own, ` + demoTable + ` (or --table), which it installs and EMPTIES first, so
it can run again and again. It enqueues emails (one with a bad address, which
fails for good), thumbnails that fail once and succeed on retry, card charges
that fail three times, a reminder scheduled a few seconds ahead and a flash
sale announcement that expires before it can go out; then it runs a worker
with a progress bar and prints what happened. Backoff is shortened to 1 s and
2 s for the demo. It takes about 5 seconds.`,
		Args: cobra.NoArgs,
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			if !a.tableSet {
				a.table = demoTable
			}
			return a.demo(cmd.Context())
		}),
	}
}

func (a *app) demo(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 50*time.Second)
	defer cancel()
	db, _, name, err := a.open(ctx)
	if err != nil {
		return err
	}
	defer db.Close()
	say := func(format string, args ...any) { fmt.Fprintf(a.out, format+"\n", args...) }
	say("jobqueue demo on %s, table %s", safeURL(a.dbURL), name)

	if err := migrations.Install(ctx, db, name); err != nil {
		return explainTableError(err, name)
	}
	q, err := a.newQueue(db, name, queue.WithRetryPolicy(demoPolicy()),
		queue.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	if err != nil {
		return err
	}
	defer q.Close()
	if _, err := q.Purge(ctx); err != nil {
		return fmt.Errorf("empty the demo table %s: %w", name, err)
	}
	say("1. installed the table (idempotent) and emptied it")

	// Enqueue a mixed set of jobs.
	emails := []queue.JobArgs{}
	for _, to := range []string{"ada@example.com", "grace@example.com", "linus@example.com", "ken@example.com", "barbara@example.com", "edsger@example.com"} {
		emails = append(emails, SendEmail{To: to, Subject: "Welcome!"})
	}
	emails = append(emails, SendEmail{To: "not-an-address", Subject: "Welcome!"})
	if _, err := q.EnqueueMany(ctx, emails, queue.Type("email")); err != nil {
		return err
	}
	for i, img := range []string{"cat.png", "dog.png", "owl.png", "fox.png"} {
		if _, err := q.Enqueue(ctx, ResizeImage{URL: "https://img.example.com/" + img, Width: 200 + 100*i}, queue.Type("media")); err != nil {
			return err
		}
	}
	for _, c := range []string{"cus_1001", "cus_1002"} {
		if _, err := q.Enqueue(ctx, ChargeCard{Customer: c, Cents: 4999}, queue.Type("billing")); err != nil {
			return err
		}
	}
	if _, err := q.Enqueue(ctx, SendEmail{To: "ada@example.com", Subject: "Your trial ends soon"}, queue.Type("email"), queue.Delay(4*time.Second)); err != nil {
		return err
	}
	if _, err := q.Enqueue(ctx, FlashSale{Item: "espresso machine"}, queue.Type("email"), queue.ExpiresIn(2*time.Second)); err != nil {
		return err
	}
	total := len(emails) + 4 + 2 + 2
	say("2. enqueued %d jobs: %d emails (one to a bad address), 4 thumbnails that fail once,", total, len(emails))
	say("   2 card charges that always fail (3 attempts, backoff 1 s then 2 s), a reminder")
	say("   due in 4 s, and a flash-sale notice that expires in 2 s")

	// Run a worker.
	w := q.NewWorker(queue.WorkerConfig{Concurrency: 4, Lease: 30 * time.Second, PollInterval: 200 * time.Millisecond})
	queue.Handle(w, func(ctx context.Context, job *queue.Job[SendEmail]) error {
		if !strings.Contains(job.Args.To, "@") {
			return queue.Permanent(fmt.Errorf("invalid address %q", job.Args.To))
		}
		return pause(ctx, 100+rand.N(300))
	})
	queue.Handle(w, func(ctx context.Context, job *queue.Job[ResizeImage]) error {
		if err := pause(ctx, 200+rand.N(300)); err != nil {
			return err
		}
		if job.Attempts == 1 {
			return errors.New("thumbnail service timed out")
		}
		return nil
	})
	queue.Handle(w, func(ctx context.Context, job *queue.Job[ChargeCard]) error {
		if err := pause(ctx, 100); err != nil {
			return err
		}
		return fmt.Errorf("card of %s declined", job.Args.Customer)
	})
	queue.Handle(w, func(ctx context.Context, job *queue.Job[FlashSale]) error {
		return queue.RetryAfter(10*time.Second, errors.New("push gateway busy"))
	})
	say("3. running a worker (4 at a time) until every job is finished")
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	runErr := make(chan error, 1)
	go func() { runErr <- w.Run(runCtx) }()

	bar := newProgress(a.err, total)
	start := time.Now()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	lastExpire := time.Now()
	for {
		select {
		case <-ctx.Done():
			bar.done()
			return fmt.Errorf("the demo did not finish in time: %w", ctx.Err())
		case err := <-runErr:
			bar.done()
			return fmt.Errorf("the worker stopped: %v", err)
		case <-tick.C:
		}
		if time.Since(lastExpire) >= time.Second {
			// Workers expire overdue jobs from time to time; the demo does
			// it every second so that the flash sale expires promptly.
			if _, err := q.ExpireOverdue(ctx); err != nil {
				return err
			}
			lastExpire = time.Now()
		}
		stats, err := q.Stats(ctx, "")
		if err != nil {
			bar.done()
			return err
		}
		finished := stats[queue.StatusCompleted] + stats[queue.StatusFailed] + stats[queue.StatusExpired]
		bar.set(int(finished), stats)
		if stats[queue.StatusPending]+stats[queue.StatusInProgress] == 0 {
			break
		}
	}
	bar.done()
	stop()
	if err := <-runErr; err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	say("4. all %d jobs finished in %.1f s", total, time.Since(start).Seconds())

	stats, err := q.Stats(ctx, "")
	if err != nil {
		return err
	}
	say("")
	tw := tabwriter.NewWriter(a.out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "STATUS\tJOBS")
	for _, s := range queue.Statuses() {
		fmt.Fprintf(tw, "%s\t%d\n", s, stats[s])
	}
	tw.Flush()
	rows, err := q.List(ctx, queue.ListFilter{Limit: 100})
	if err != nil {
		return err
	}
	say("")
	say("Examples (one per kind and outcome; SCHEDULED is when the last attempt was due):")
	seen := map[string]bool{}
	var examples []*queue.JobRow
	for i := len(rows) - 1; i >= 0; i-- { // oldest first
		j := rows[i]
		key := fmt.Sprintf("%s/%s/%d/%t", j.Name, j.Status, j.Attempts, j.ScheduledAt.Sub(j.CreatedAt) > 2*time.Second)
		if !seen[key] {
			seen[key] = true
			examples = append(examples, j)
		}
	}
	if err := writeJobTable(a.out, examples); err != nil {
		return err
	}
	say("")
	say("Look closer: jobqueue --db %s --table %s list   (or: show ID --json)", safeURL(a.dbURL), name)
	return nil
}

// pause waits ms milliseconds, or until ctx ends.
func pause(ctx context.Context, ms int) error {
	select {
	case <-time.After(time.Duration(ms) * time.Millisecond):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// progress shows how many of the demo's jobs are finished: a bar redrawn in
// place when w is a terminal, else a plain line whenever the count changes.
// (A few lines by hand rather than a progress-bar library: one bar, redrawn
// with \r, needs no dependency.)
type progress struct {
	w        io.Writer
	total    int
	terminal bool
	last     int
	drawn    bool
}

func newProgress(w io.Writer, total int) *progress {
	p := &progress{w: w, total: total, last: -1}
	if f, ok := w.(*os.File); ok {
		if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
			p.terminal = true
		}
	}
	return p
}

func (p *progress) set(n int, stats map[queue.Status]int64) {
	detail := fmt.Sprintf("%d completed, %d failed, %d expired, %d waiting", stats[queue.StatusCompleted],
		stats[queue.StatusFailed], stats[queue.StatusExpired], stats[queue.StatusPending]+stats[queue.StatusInProgress])
	if p.terminal {
		const width = 30
		filled := width * n / max(p.total, 1)
		fmt.Fprintf(p.w, "\r[%s%s] %d/%d  %s   ", strings.Repeat("#", filled), strings.Repeat("-", width-filled), n, p.total, detail)
		p.drawn = true
		return
	}
	if n != p.last {
		fmt.Fprintf(p.w, "progress: %d/%d finished (%s)\n", n, p.total, detail)
	}
	p.last = n
}

func (p *progress) done() {
	if p.terminal && p.drawn {
		fmt.Fprintln(p.w)
	}
}
