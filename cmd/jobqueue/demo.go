package main

import (
	"context"
	"encoding/json"
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

	"github.com/jobqueue/jobqueue/internal/engine"
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
	var force bool
	cmd := &cobra.Command{
		Use:   "demo [--force]",
		Short: "Show the whole life of jobs: enqueue, run, retry, schedule, expire (about 5 s)",
		Long: `demo shows the whole life of jobs on the embedded SQLite default (or --db) in a
table of its own, ` + demoTable + ` (or --table), which it installs and EMPTIES first, so
it can run again and again. A table that holds only the jobs of earlier demos
is emptied without asking; one that holds other jobs is refused unless --force
is given, and then EVERY JOB IN IT IS DELETED.

It enqueues emails (one with a bad address, which fails for good), thumbnails
that fail once and succeed on retry, card charges that fail three times, a
reminder scheduled a few seconds ahead and a flash sale announcement that
expires before it can go out; then it runs a worker with a progress bar and
prints what happened. Backoff is shortened to 1 s and 2 s for the demo. It
takes about 5 seconds.`,
		Args: flagsOnly,
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			if !a.tableSet {
				a.table = demoTable
			}
			return a.demo(cmd.Context(), force)
		}),
	}
	cmd.Flags().BoolVar(&force, "force", false, "empty the table even though it holds jobs other than earlier demos', DELETING THEM")
	return cmd
}

// demoJob is one job the demo enqueues: its args, its type and any other
// options.
type demoJob struct {
	args queue.JobArgs
	typ  string
	opts []queue.EnqueueOption
}

// demoEmails are the welcome emails the demo enqueues in one batch, one of
// them to a bad address.
func demoEmails() []demoJob {
	var jobs []demoJob
	for _, to := range []string{"ada@example.com", "grace@example.com", "linus@example.com", "ken@example.com", "barbara@example.com", "edsger@example.com", "not-an-address"} {
		jobs = append(jobs, demoJob{args: SendEmail{To: to, Subject: "Welcome!"}, typ: "email"})
	}
	return jobs
}

// demoSingles are the demo's other jobs, enqueued one by one: thumbnails,
// card charges, a reminder due in 4 s and a flash sale that expires in 2 s.
func demoSingles() []demoJob {
	var jobs []demoJob
	for i, img := range []string{"cat.png", "dog.png", "owl.png", "fox.png"} {
		jobs = append(jobs, demoJob{args: ResizeImage{URL: "https://img.example.com/" + img, Width: 200 + 100*i}, typ: "media"})
	}
	for _, c := range []string{"cus_1001", "cus_1002"} {
		jobs = append(jobs, demoJob{args: ChargeCard{Customer: c, Cents: 4999}, typ: "billing"})
	}
	return append(jobs,
		demoJob{args: SendEmail{To: "ada@example.com", Subject: "Your trial ends soon"}, typ: "email", opts: []queue.EnqueueOption{queue.Delay(4 * time.Second)}},
		demoJob{args: FlashSale{Item: "espresso machine"}, typ: "email", opts: []queue.EnqueueOption{queue.ExpiresIn(2 * time.Second)}},
	)
}

// enqueueDemoJobs enqueues the demo's jobs in q, the welcome emails in one
// batch and the others one by one, and returns how many.
func enqueueDemoJobs(ctx context.Context, q *queue.Queue) (int, error) {
	emails, singles := demoEmails(), demoSingles()
	batch := make([]queue.JobArgs, len(emails))
	for i, j := range emails {
		batch[i] = j.args
	}
	if _, err := q.EnqueueMany(ctx, batch, queue.Type("email")); err != nil {
		return 0, err
	}
	for _, j := range singles {
		if _, err := q.Enqueue(ctx, j.args, append([]queue.EnqueueOption{queue.Type(j.typ)}, j.opts...)...); err != nil {
			return 0, err
		}
	}
	return len(emails) + len(singles), nil
}

// demoScan is the most jobs demoForeignJobs reads to tell the demo's own:
// a table of earlier demos holds one run's jobs (the demo empties it first).
const demoScan = 1000

// demoForeignJobs counts the jobs of q's table (total) and those of them
// that no demo enqueued (foreign): a job is a demo's when its kind, type
// and payload are those of one of the demo's jobs. A table of more than
// demoScan jobs is not a demo's: only demoScan of them are looked at, the
// others counted as foreign.
func demoForeignJobs(ctx context.Context, q *queue.Queue) (total, foreign int64, err error) {
	total, err = countJobs(ctx, q, "")
	if err != nil || total == 0 {
		return total, 0, err
	}
	own := map[string]bool{}
	for _, j := range append(demoEmails(), demoSingles()...) {
		payload, err := json.Marshal(j.args)
		if err != nil {
			return 0, 0, err
		}
		own[demoJobKey(j.args.Kind(), j.typ, payload)] = true
	}
	rows, err := q.List(ctx, queue.ListFilter{Limit: int(min(total, demoScan))})
	if err != nil {
		return 0, 0, err
	}
	foreign = total
	for _, r := range rows {
		if own[demoJobKey(r.Name, r.Type, r.Payload)] {
			foreign--
		}
	}
	return total, foreign, nil
}

// demoJobKey identifies a job by kind, type and payload, the payload in a
// canonical form (databases store JSON with their own spacing and key
// order); a payload that is not JSON gives a key of no demo job.
func demoJobKey(kind, typ string, payload []byte) string {
	var v any
	if err := json.Unmarshal(payload, &v); err != nil {
		return ""
	}
	canonical, err := json.Marshal(v)
	if err != nil {
		return ""
	}
	return kind + "\x00" + typ + "\x00" + string(canonical)
}

func (a *app) demo(ctx context.Context, force bool) error {
	ctx, cancel := context.WithTimeout(ctx, 50*time.Second)
	defer cancel()
	db, _, name, err := a.open(ctx)
	if err != nil {
		return err
	}
	defer db.Close()
	say := func(format string, args ...any) { fmt.Fprintf(a.out, format+"\n", args...) }

	if err := migrations.Install(ctx, db, name); err != nil {
		return explainTableError(err, name)
	}
	q, err := a.newQueue(ctx, db, name, queue.WithRetryPolicy(demoPolicy()),
		queue.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	if err != nil {
		return err
	}
	defer q.Close()
	held, foreign, err := demoForeignJobs(ctx, q)
	if err != nil {
		return err
	}
	if foreign > 0 && !force {
		return fmt.Errorf("table %s holds %s (%d of them not from an earlier demo) and demo empties its table first: pass --table NAME for a table of its own (by default %s), or --force to delete every job in %s", name, jobCount(held), foreign, demoTable, name)
	}
	say("jobqueue demo on %s, table %s", engine.SafeURL(a.dbURL), name)
	if _, err := q.Purge(ctx); err != nil {
		return fmt.Errorf("empty the demo table %s: %w", name, err)
	}
	say("1. installed the table (idempotent) and emptied it")

	total, err := enqueueDemoJobs(ctx, q)
	if err != nil {
		return err
	}
	say("2. enqueued %d jobs: %d emails (one to a bad address), 4 thumbnails that fail once,", total, len(demoEmails()))
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
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return fmt.Errorf("the demo did not finish within 50 s: %w", ctx.Err())
			}
			return fmt.Errorf("the demo's worker was running: %w", ctx.Err())
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
	// A command to paste: the URL quoted for the shell (a '&' in it would
	// send the command to the background).
	say("Look closer: jobqueue --db %s --table %s list   (or: show ID --json)", shellQuote(engine.SafeURL(a.dbURL)), shellQuote(name))
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
