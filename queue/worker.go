package queue

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"runtime/debug"
	"sync"
	"time"
)

// WorkerConfig configures a Worker. A zero field takes the default named in
// its comment.
type WorkerConfig struct {
	// Types are the queues (the type column) the worker takes jobs from;
	// empty means every type.
	Types []string
	// Concurrency is how many handlers run at once (default 10). One
	// goroutine claims jobs for all of them, in batches that fill only the
	// free slots, so more concurrency does not mean more round trips.
	Concurrency int
	// Lease is how long a claimed attempt holds its job (default 5 minutes,
	// at least 1 second). Heartbeats renew it while the handler runs; an
	// attempt whose worker vanished is reclaimed once its lease has passed.
	// When renewals fail (the database does not answer) until the lease
	// would run out before the next heartbeat, the handler's context is
	// cancelled with a cause wrapping ErrLeaseLost and its result dropped,
	// so that it does not run on while another worker reclaims the job.
	Lease time.Duration
	// PollInterval is how long an idle worker waits before it looks for due
	// jobs again (default 1 second), jittered by ±20% so that workers spread
	// out. An enqueue in this process, on PostgreSQL an enqueue in any
	// process (see PollOnly), or the Waker wakes it at once.
	PollInterval time.Duration
	// HeartbeatInterval is how often the leases of running attempts are
	// renewed, all in one statement (default Lease/3; must be below Lease).
	HeartbeatInterval time.Duration
	// MaintenanceInterval is how often the worker runs ExpireOverdue and
	// Reclaim (default 30 seconds, jittered; negative: never). It also runs
	// them once when it starts.
	MaintenanceInterval time.Duration
	// MaxJobs, if positive, is how many jobs the worker claims in all: then
	// it claims no more, lets them finish, and Run returns nil.
	MaxJobs int
	// MaxRuntime, if positive, is how long the worker runs: then it stops as
	// if ctx had ended (with ShutdownTimeout), and Run returns nil.
	MaxRuntime time.Duration
	// ShutdownTimeout is how long running handlers may go on once the worker
	// stops (ctx ended or MaxRuntime passed) before their contexts are
	// cancelled, with a cause wrapping ErrWorkerShutdown (default 30
	// seconds; negative: cancel at once).
	//
	// An attempt cancelled this way that then returns an error is not
	// recorded as a failure of the job: it is released at once, by
	// Reclaim's rule (pending again now; failed if it was the last attempt,
	// expired if its deadline has passed), so that another worker takes it
	// without waiting for its lease to run out. The attempt counts as
	// started, as it would had the worker vanished. A handler that still
	// returns nil has done its work and is completed. A handler that has
	// not returned 5 seconds after the cancellation is left running and its
	// job in_progress, for Reclaim once its lease has passed (releasing it
	// would let the job run twice at once).
	ShutdownTimeout time.Duration
	// Waker, if set, wakes the idle worker when jobs may be ready in other
	// processes. Enqueues in this process wake it without one, and so do,
	// on PostgreSQL, enqueues anywhere (see PollOnly).
	Waker Waker
	// PollOnly turns off listening on PostgreSQL. By default a worker on
	// PostgreSQL holds one connection of the queue's *sql.DB for itself,
	// LISTENs there on the channel named like the table, and every enqueue
	// (from any process, at the commit of its transaction) NOTIFYs that
	// channel with the job's type, so idle workers of that type wake at
	// once instead of at their next poll. If the connection fails, the
	// worker polls meanwhile and listens again with backoff. Set PollOnly
	// where LISTEN cannot work, such as behind PgBouncer in transaction
	// pooling mode, or to spare the connection; the worker then finds the
	// jobs of other processes by polling. A pool limited to one connection
	// polls only. MySQL and SQLite always poll.
	PollOnly bool
}

// Waker tells an idle worker that jobs may be ready, so that it claims at
// once instead of waiting for its next poll.
//
// Run calls Wakeups once and, whenever it is idle, waits on the channel as
// well as on its poll timer. A wake-up is only a hint: the worker claims,
// and goes back to waiting if there is nothing. The Waker should send
// without blocking into a channel with a buffer of one, so that a burst of
// notifications becomes one wake-up; closing the channel stops the worker
// from listening to it (it then relies on polling).
type Waker interface {
	Wakeups() <-chan struct{}
}

// Defaults of WorkerConfig.
const (
	DefaultConcurrency         = 10
	DefaultLease               = 5 * time.Minute
	DefaultPollInterval        = time.Second
	DefaultMaintenanceInterval = 30 * time.Second
	DefaultShutdownTimeout     = 30 * time.Second
)

// Tuning of the worker's batching.
const (
	// completeBatch is the most attempts one complete statement finishes,
	// and heartbeatBatch the most one heartbeat statement renews.
	completeBatch  = 500
	heartbeatBatch = 500
	// completeLinger is how long the first finished attempt of a batch
	// waits for others before the batch is written; while a batch is being
	// written, the next one gathers.
	completeLinger = 2 * time.Millisecond
	// claimGather is how long the claimer waits, while work remains, for
	// every slot to be free before it claims for fewer: short next to a
	// claim's round trip, long enough for handlers that just finished.
	claimGather = 500 * time.Microsecond
	// abandonGrace is how long Run waits for handlers after cancelling their
	// contexts at shutdown before it returns without them.
	abandonGrace = 5 * time.Second
	// dbCallTimeout bounds each of the worker's own statements.
	dbCallTimeout = 30 * time.Second
)

// ErrWorkerShutdown is wrapped by the cause (context.Cause) of a handler's
// context that the worker cancelled because it stopped and ShutdownTimeout
// passed. A lost job cancels the context with a cause wrapping ErrLeaseLost.
var ErrWorkerShutdown = errors.New("jobqueue: worker shut down")

// Errors set as the cause of a handler's context when the worker cancels it.
var (
	// errShutdown: the worker stopped and ShutdownTimeout passed.
	errShutdown = fmt.Errorf("%w (ShutdownTimeout passed)", ErrWorkerShutdown)
	// errLostJob: a heartbeat found the attempt no longer holds its job.
	errLostJob = fmt.Errorf("%w: a heartbeat found the attempt no longer holds its job", ErrLeaseLost)
	// errLeaseRanOut: heartbeats failed, and the lease runs out before the
	// next one; another worker may reclaim the job and run it.
	errLeaseRanOut = fmt.Errorf("%w: its lease could not be renewed (heartbeats failed) and runs out before the next heartbeat", ErrLeaseLost)
)

// Worker claims jobs from a Queue and runs their handlers. Create it with
// Queue.NewWorker, register handlers with Handle and HandleDefault, then
// call Run.
type Worker struct {
	q   *Queue
	cfg WorkerConfig

	mu       sync.Mutex
	handlers map[string]handlerFunc
	fallback handlerFunc
	running  bool
	// abandonGrace overrides the const of that name (tests).
	abandonGrace time.Duration
}

// NewWorker returns a worker of the queue configured by cfg. Its settings
// are checked when Run starts.
func (q *Queue) NewWorker(cfg WorkerConfig) *Worker {
	cfg.Types = append([]string(nil), cfg.Types...)
	return &Worker{q: q, cfg: cfg, handlers: map[string]handlerFunc{}}
}

// withDefaults fills the zero fields of c and checks it.
func (c WorkerConfig) withDefaults() (WorkerConfig, error) {
	if c.Concurrency == 0 {
		c.Concurrency = DefaultConcurrency
	}
	if c.Lease == 0 {
		c.Lease = DefaultLease
	}
	if c.PollInterval == 0 {
		c.PollInterval = DefaultPollInterval
	}
	if c.HeartbeatInterval == 0 {
		c.HeartbeatInterval = c.Lease / 3
	}
	if c.MaintenanceInterval == 0 {
		c.MaintenanceInterval = DefaultMaintenanceInterval
	}
	if c.ShutdownTimeout == 0 {
		c.ShutdownTimeout = DefaultShutdownTimeout
	}
	var problems []error
	if c.Concurrency < 0 {
		problems = append(problems, fmt.Errorf("Concurrency %d is negative", c.Concurrency))
	}
	if c.Lease < time.Second {
		problems = append(problems, fmt.Errorf("Lease %v is under 1s (MySQL keeps whole seconds)", c.Lease))
	}
	if c.PollInterval < 0 {
		problems = append(problems, fmt.Errorf("PollInterval %v is negative", c.PollInterval))
	}
	if c.HeartbeatInterval <= 0 || c.HeartbeatInterval >= c.Lease {
		problems = append(problems, fmt.Errorf("HeartbeatInterval %v must be positive and below Lease %v", c.HeartbeatInterval, c.Lease))
	}
	if c.MaxJobs < 0 {
		problems = append(problems, fmt.Errorf("MaxJobs %d is negative", c.MaxJobs))
	}
	if c.MaxRuntime < 0 {
		problems = append(problems, fmt.Errorf("MaxRuntime %v is negative", c.MaxRuntime))
	}
	for _, t := range c.Types {
		if problem := typeProblem(t); problem != "" {
			problems = append(problems, fmt.Errorf("Types: %s", problem))
		}
	}
	if len(problems) > 0 {
		return c, fmt.Errorf("jobqueue: invalid WorkerConfig: %w", errors.Join(problems...))
	}
	return c, nil
}

// Run claims and runs jobs until ctx ends, MaxRuntime passes or MaxJobs jobs
// were claimed. Then it stops claiming, lets running handlers finish (for up
// to ShutdownTimeout once ctx ended or MaxRuntime passed; after that their
// contexts are cancelled), writes the results still pending, and returns nil.
// It returns an error for an invalid configuration or when handlers ignored
// their cancelled contexts for 5 seconds (Run leaves them running). A Worker
// runs once at a time; it may Run again after Run returned.
func (w *Worker) Run(ctx context.Context) error {
	cfg, err := w.cfg.withDefaults()
	if err != nil {
		return err
	}
	w.mu.Lock()
	if w.running {
		w.mu.Unlock()
		return errors.New("jobqueue: Worker.Run: this worker is already running")
	}
	w.running = true
	r := &run{
		q:        w.q,
		cfg:      cfg,
		handlers: maps.Clone(w.handlers),
		fallback: w.fallback,
		abandon:  abandonGrace,
	}
	if w.abandonGrace > 0 {
		r.abandon = w.abandonGrace
	}
	w.mu.Unlock()
	defer func() {
		w.mu.Lock()
		w.running = false
		w.mu.Unlock()
	}()
	return r.run(ctx)
}

// run is one Run of a Worker: one claimer (the goroutine of Run) feeding
// Concurrency executors, with a completer that writes finished attempts in
// batches, a heartbeat loop renewing the leases of all running attempts in
// one statement, and a maintenance loop.
type run struct {
	q        *Queue
	cfg      WorkerConfig
	log      *slog.Logger
	handlers map[string]handlerFunc
	fallback handlerFunc
	abandon  time.Duration // see abandonGrace

	// dbCtx is the context of the worker's own statements: it keeps ctx's
	// values but not its end, so that results are written during shutdown.
	dbCtx context.Context
	// jobs is the parent of the handlers' contexts; cancelJobs ends it at
	// shutdown.
	jobs       context.Context
	cancelJobs context.CancelCauseFunc

	work        chan *attempt   // claimer → executors
	freed       chan struct{}   // executors → claimer: a slot is free
	completions chan completion // executors → completer

	mu       sync.Mutex
	inflight map[AttemptRef]*attempt // claimed and not yet finished
	released []AttemptRef            // cut off by shutdown, to release
}

// attempt is one claimed job on its way through the worker.
type attempt struct {
	row    *JobRow
	ref    AttemptRef
	ctx    context.Context
	cancel context.CancelCauseFunc
	// leaseEnd is when the attempt's lease ends at the latest, as far as
	// the worker knows (guarded by run.mu): the claim's lease_until, then
	// moved by each heartbeat that renewed it.
	leaseEnd time.Time
}

// completion is an attempt whose handler succeeded, waiting to be written.
type completion struct {
	a   *attempt
	dur time.Duration
}

func (r *run) run(ctx context.Context) error {
	r.log = r.q.logger.With("component", "worker")
	r.dbCtx = context.WithoutCancel(ctx)
	r.jobs, r.cancelJobs = context.WithCancelCause(r.dbCtx)
	defer r.cancelJobs(context.Canceled)
	r.work = make(chan *attempt, r.cfg.Concurrency)
	r.freed = make(chan struct{}, r.cfg.Concurrency)
	r.completions = make(chan completion, completeBatch)
	r.inflight = map[AttemptRef]*attempt{}
	if len(r.handlers) == 0 && r.fallback == nil {
		r.log.Warn("worker runs with no handler: every job it claims fails as an unknown kind")
	}

	stop := ctx
	if r.cfg.MaxRuntime > 0 {
		var cancel context.CancelFunc
		stop, cancel = context.WithTimeout(ctx, r.cfg.MaxRuntime)
		defer cancel()
	}
	r.log.Info("worker started", "types", r.cfg.Types, "concurrency", r.cfg.Concurrency, "lease", r.cfg.Lease)

	// Background loops that end with the claimer.
	var bg sync.WaitGroup
	maintCtx, stopMaint := context.WithCancel(stop)
	if r.cfg.MaintenanceInterval > 0 {
		bg.Go(func() { r.maintain(maintCtx) })
	}
	completerDone, stopCompleter := make(chan struct{}), make(chan struct{})
	go func() { defer close(completerDone); r.completer(stopCompleter) }()
	var execs sync.WaitGroup
	for range r.cfg.Concurrency {
		execs.Go(r.executor)
	}
	hbCtx, stopHeartbeats := context.WithCancel(r.dbCtx)
	hbDone := make(chan struct{})
	go func() { defer close(hbDone); r.heartbeats(hbCtx) }()

	stopListening := r.startListener(stop) // PostgreSQL: LISTEN feeds the Waker
	claimed := r.claimLoop(stop)
	stopListening()
	stopMaint()
	close(r.work)

	// Let the running handlers finish: all the time they need when MaxJobs
	// ended the run, ShutdownTimeout once ctx ended or MaxRuntime passed.
	execsDone := make(chan struct{})
	go func() { execs.Wait(); close(execsDone) }()
	var runErr error
	var grace, abandon <-chan time.Time
	stopped := stop.Done()
wait:
	for {
		select {
		case <-execsDone:
			break wait
		case <-stopped:
			stopped = nil
			if r.cfg.ShutdownTimeout < 0 {
				grace = closedTimeChan()
			} else {
				grace = time.After(r.cfg.ShutdownTimeout)
			}
			if n := r.running(); n > 0 {
				r.log.Info("worker stopping: waiting for running handlers", "running", n, "timeout", max(r.cfg.ShutdownTimeout, 0))
			}
		case <-grace:
			grace = nil
			if n := r.running(); n > 0 {
				r.log.Warn("shutdown timeout passed: cancelling running handlers", "running", n)
			}
			r.cancelJobs(errShutdown)
			abandon = time.After(r.abandon)
		case <-abandon:
			n := r.running()
			runErr = fmt.Errorf("jobqueue: worker stopped with %d handler(s) still running %v after their contexts were cancelled; their jobs stay in_progress until Reclaim (make handlers return when their context ends)", n, r.abandon)
			r.log.Error("handlers ignore their cancelled contexts; leaving them", "running", n)
			break wait
		}
	}

	stopHeartbeats()
	<-hbDone
	r.releaseInterrupted()
	// Every executor that finished has handed its result over: write the
	// last batch.
	close(stopCompleter)
	<-completerDone
	bg.Wait()
	r.log.Info("worker stopped", "claimed", claimed)
	return runErr
}

// releaseInterrupted releases, in one batch, the attempts whose handlers
// returned an error after the shutdown cancelled them.
func (r *run) releaseInterrupted() {
	r.mu.Lock()
	refs := r.released
	r.released = nil
	r.mu.Unlock()
	if len(refs) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(r.dbCtx, dbCallTimeout)
	defer cancel()
	stale, err := r.q.release(ctx, refs)
	if err != nil {
		r.log.Error("releasing interrupted attempts failed; their jobs stay in_progress until Reclaim", "jobs", len(refs), "err", err)
		return
	}
	r.log.Info("released interrupted attempts", "jobs", len(refs)-len(stale), "stale", len(stale))
}

// closedTimeChan is a channel that is ready at once.
func closedTimeChan() <-chan time.Time {
	ch := make(chan time.Time, 1)
	ch <- time.Now()
	return ch
}

// running is the number of claimed attempts not yet finished.
func (r *run) running() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.inflight)
}

// claimLoop claims jobs into the free slots until stop ends or MaxJobs jobs
// were claimed, and returns how many it claimed. After a full batch it
// claims again as soon as a slot is free; after a short one (nothing more
// was due) it waits for the poll timer or a wake-up.
func (r *run) claimLoop(stop context.Context) int {
	free := r.cfg.Concurrency
	claimed := 0
	var wakeups <-chan struct{}
	if r.cfg.Waker != nil {
		wakeups = r.cfg.Waker.Wakeups()
	}
	errDelay := time.Duration(0)
	for {
		// Take back the slots freed meanwhile.
	drain:
		for {
			select {
			case <-r.freed:
				free++
			default:
				break drain
			}
		}
		if stop.Err() != nil {
			return claimed
		}
		if r.cfg.MaxJobs > 0 && claimed >= r.cfg.MaxJobs {
			r.log.Info("worker claimed MaxJobs jobs; finishing them", "max_jobs", r.cfg.MaxJobs)
			return claimed
		}
		if free == 0 {
			select {
			case <-r.freed:
				free++
				continue
			case <-stop.Done():
				return claimed
			}
		}
		// One claim takes at most maxClaim jobs: ask for no more, so that a
		// full claim is told from a short one (nothing more due).
		n := min(free, maxClaim)
		if r.cfg.MaxJobs > 0 {
			n = min(n, r.cfg.MaxJobs-claimed)
		}
		if free < r.cfg.Concurrency && n == free {
			// Work remains but some slots are busy: give the running
			// handlers a moment to free more, so that one claim fills
			// several slots rather than one claim per slot.
			free = r.gatherSlots(free, r.cfg.Concurrency, stop)
			n = min(free, maxClaim)
			if r.cfg.MaxJobs > 0 {
				n = min(n, r.cfg.MaxJobs-claimed)
			}
		}
		// Take the wake channel before claiming, so that an enqueue that
		// lands while the claim runs wakes the idle wait below.
		woken := r.q.wake.wait()
		rows, err := r.claim(n)
		var idle time.Duration
		switch {
		case err != nil:
			errDelay = min(max(2*errDelay, 100*time.Millisecond), max(r.cfg.PollInterval, 5*time.Second))
			r.log.Error("claiming jobs failed; trying again", "err", err, "retry_in", errDelay)
			idle, woken = errDelay, nil
		case len(rows) < n:
			errDelay = 0
			idle = jitter(r.cfg.PollInterval)
		default:
			errDelay = 0
		}
		for _, row := range rows {
			r.dispatch(row)
		}
		claimed += len(rows)
		free -= len(rows)
		if idle == 0 {
			continue // a full batch: more may be due at once
		}
		// Idle: wait for the poll timer, a wake-up or the end, counting the
		// slots that free up meanwhile.
		timer := time.NewTimer(idle)
	wait:
		for {
			select {
			case <-stop.Done():
				timer.Stop()
				return claimed
			case <-timer.C:
				break wait
			case <-woken:
				timer.Stop()
				break wait
			case _, ok := <-wakeups:
				if !ok {
					wakeups = nil
					continue
				}
				timer.Stop()
				break wait
			case <-r.freed:
				free++
			}
		}
	}
}

// gatherSlots waits up to claimGather for free to reach want, counting the
// slots that free up, and returns the number free.
func (r *run) gatherSlots(free, want int, stop context.Context) int {
	timer := time.NewTimer(claimGather)
	defer timer.Stop()
	for free < want {
		select {
		case <-r.freed:
			free++
		case <-timer.C:
			return free
		case <-stop.Done():
			return free
		}
	}
	return free
}

// claim runs one claim of up to n jobs. It is not cancelled by the worker's
// stop: a claim cut off half-way could leave claimed rows nobody runs.
func (r *run) claim(n int) ([]*JobRow, error) {
	ctx, cancel := context.WithTimeout(r.dbCtx, dbCallTimeout)
	defer cancel()
	return r.q.claim(ctx, r.cfg.Types, n, r.cfg.Lease)
}

// dispatch registers a claimed row as in flight and hands it to an executor
// (the channel has room for every slot, so this never blocks).
func (r *run) dispatch(row *JobRow) {
	ctx, cancel := context.WithCancelCause(r.jobs)
	a := &attempt{row: row, ref: AttemptRef{ID: row.ID, Token: row.ClaimToken}, ctx: ctx, cancel: cancel}
	if row.LeaseUntil != nil {
		a.leaseEnd = *row.LeaseUntil
	} else {
		a.leaseEnd = r.q.now().Add(r.cfg.Lease)
	}
	r.mu.Lock()
	r.inflight[a.ref] = a
	r.mu.Unlock()
	r.log.Debug("job claimed", "job_id", row.ID, "kind", row.Name, "type", row.Type, "attempt", row.Attempts)
	r.q.emit(Event{Kind: EventClaimed, Job: row})
	r.work <- a
}

// executor runs the attempts handed to it, one at a time.
func (r *run) executor() {
	for a := range r.work {
		r.execute(a)
		r.freed <- struct{}{}
	}
}

// execute runs one attempt's handler and records its result.
func (r *run) execute(a *attempt) {
	defer a.cancel(context.Canceled)
	row := a.row
	log := r.log.With("job_id", row.ID, "kind", row.Name, "type", row.Type, "attempt", row.Attempts)
	start := time.Now()
	err := r.call(a, log)
	dur := time.Since(start)
	r.mu.Lock()
	delete(r.inflight, a.ref)
	r.mu.Unlock()

	cause := context.Cause(a.ctx)
	switch {
	case errors.Is(cause, ErrLeaseLost):
		log.Warn("handler finished after its attempt lost the job (or could not renew its lease); result dropped, the job is left to Reclaim",
			"handler_err", err, "duration", dur, "cause", cause)
		return
	case err == nil:
		r.completions <- completion{a: a, dur: dur}
		return
	case errors.Is(cause, errShutdown):
		log.Info("handler cancelled by shutdown; releasing its job", "handler_err", err, "duration", dur)
		r.mu.Lock()
		r.released = append(r.released, a.ref)
		r.mu.Unlock()
		return
	}

	ctx, cancel := context.WithTimeout(r.dbCtx, dbCallTimeout)
	defer cancel()
	status, next, ferr := r.q.fail(ctx, row, err)
	if ferr != nil {
		if errors.Is(ferr, ErrLeaseLost) {
			log.Warn("handler failed after its attempt lost the job; nothing recorded", "handler_err", err, "duration", dur)
		} else {
			log.Error("recording a failed attempt failed; the job stays in_progress until Reclaim", "handler_err", err, "err", ferr)
		}
		return
	}
	ev := *row
	ev.Status, ev.Error, ev.ClaimToken, ev.LeaseUntil = status, errorText(err), "", nil
	permanent := status != StatusPending
	if permanent {
		now := r.q.now()
		ev.FinishedAt = &now
		log.Error("job failed for good", "status", status, "err", err, "duration", dur)
	} else {
		ev.ScheduledAt = next
		log.Warn("job attempt failed; will retry", "err", err, "next_at", next, "duration", dur)
	}
	r.q.emit(Event{Kind: EventFailed, Job: &ev, Err: err, Permanent: permanent, Duration: dur})
}

// call runs the attempt's handler, turning a panic into an error.
func (r *run) call(a *attempt, log *slog.Logger) (err error) {
	defer func() {
		if p := recover(); p != nil {
			log.Error("handler panicked", "panic", p, "stack", string(debug.Stack()))
			err = fmt.Errorf("jobqueue: handler panicked: %v", p)
		}
	}()
	if h, ok := r.handlers[a.row.Name]; ok {
		return h(a.ctx, a.row)
	}
	if r.fallback != nil {
		return r.fallback(a.ctx, a.row)
	}
	return unknownKind(a.row)
}

// completer writes succeeded attempts in batches: it waits for the first,
// gathers more for up to completeLinger (or until completeBatch), and
// writes them in one statement; finished attempts gather while it writes.
// When stop is closed it writes what has arrived and returns.
func (r *run) completer(stop <-chan struct{}) {
	batch := make([]completion, 0, completeBatch)
	for {
		batch = batch[:0]
		select {
		case c := <-r.completions:
			batch = append(batch, c)
		case <-stop:
			for {
				select {
				case c := <-r.completions:
					batch = append(batch, c)
					if len(batch) == completeBatch {
						r.writeCompletions(batch)
						batch = batch[:0]
					}
				default:
					if len(batch) > 0 {
						r.writeCompletions(batch)
					}
					return
				}
			}
		}
		linger := time.NewTimer(completeLinger)
	gather:
		for len(batch) < completeBatch {
			select {
			case c := <-r.completions:
				batch = append(batch, c)
			case <-linger.C:
				break gather
			}
		}
		linger.Stop()
		r.writeCompletions(batch)
	}
}

// writeCompletions completes one batch, trying a few times when the
// database fails; attempts it cannot write stay in_progress until Reclaim.
func (r *run) writeCompletions(batch []completion) {
	refs := make([]AttemptRef, len(batch))
	for i, c := range batch {
		refs[i] = c.a.ref
	}
	var stale []AttemptRef
	var err error
	for try, wait := 0, 50*time.Millisecond; try < 4; try, wait = try+1, wait*4 {
		if try > 0 {
			time.Sleep(wait)
		}
		ctx, cancel := context.WithTimeout(r.dbCtx, dbCallTimeout)
		stale, err = r.q.complete(ctx, refs)
		cancel()
		if err == nil {
			break
		}
		r.log.Warn("completing jobs failed; trying again", "jobs", len(refs), "err", err)
	}
	if err != nil {
		r.log.Error("completing jobs failed; they stay in_progress until Reclaim runs them again", "jobs", len(refs), "err", err)
		return
	}
	lost := make(map[AttemptRef]bool, len(stale))
	for _, s := range stale {
		lost[s] = true
	}
	now := r.q.now()
	for _, c := range batch {
		row := c.a.row
		if lost[c.a.ref] {
			r.log.Warn("job finished but its attempt had lost the job (lease passed and it was reclaimed, retried or deleted); completion refused",
				"job_id", row.ID, "kind", row.Name)
			continue
		}
		ev := *row
		ev.Status, ev.ClaimToken, ev.LeaseUntil, ev.FinishedAt = StatusCompleted, "", nil, &now
		r.log.Debug("job completed", "job_id", row.ID, "kind", row.Name, "duration", c.dur)
		r.q.emit(Event{Kind: EventCompleted, Job: &ev, Duration: c.dur})
	}
}

// heartbeats renews the leases of every running attempt each
// HeartbeatInterval, and cancels the handlers of attempts that lost their
// job, until ctx ends. It also cancels the handler of an attempt whose
// renewal failed when its lease ends before the next heartbeat: past its
// lease another worker may reclaim the job, and the two must not run it at
// once.
func (r *run) heartbeats(ctx context.Context) {
	tick := time.NewTicker(r.cfg.HeartbeatInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		r.mu.Lock()
		refs := make([]AttemptRef, 0, len(r.inflight))
		for ref := range r.inflight {
			refs = append(refs, ref)
		}
		r.mu.Unlock()
		for len(refs) > 0 {
			chunk := refs[:min(len(refs), heartbeatBatch)]
			refs = refs[len(chunk):]
			cctx, cancel := context.WithTimeout(ctx, min(r.cfg.HeartbeatInterval, dbCallTimeout))
			sent := r.q.now()
			lost, err := r.q.heartbeat(cctx, chunk, r.cfg.Lease)
			cancel()
			if err != nil {
				if ctx.Err() == nil {
					r.log.Warn("renewing leases failed; trying again at the next heartbeat", "attempts", len(chunk), "err", err)
					r.cancelUnrenewed(chunk)
				}
				continue
			}
			// The renewed leases end at sent+Lease or a little later
			// (MySQL keeps whole seconds, so take the second before).
			renewedTo := sent.Add(r.cfg.Lease).Truncate(time.Second)
			r.mu.Lock()
			for _, ref := range chunk {
				if a, ok := r.inflight[ref]; ok && a.leaseEnd.Before(renewedTo) {
					a.leaseEnd = renewedTo
				}
			}
			for _, ref := range lost {
				if a, ok := r.inflight[ref]; ok {
					r.log.Warn("attempt lost its job (lease passed and it was reclaimed, retried or deleted); cancelling its handler",
						"job_id", ref.ID, "kind", a.row.Name)
					a.cancel(errLostJob)
				}
			}
			r.mu.Unlock()
		}
	}
}

// cancelUnrenewed cancels the handlers of the attempts of refs, whose
// renewal just failed, when their leases end before the next heartbeat.
func (r *run) cancelUnrenewed(refs []AttemptRef) {
	next := r.q.now().Add(r.cfg.HeartbeatInterval)
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, ref := range refs {
		if a, ok := r.inflight[ref]; ok && a.leaseEnd.Before(next) {
			r.log.Error("attempt's lease runs out and could not be renewed; cancelling its handler (the job is left to Reclaim)",
				"job_id", ref.ID, "kind", a.row.Name, "lease_end", a.leaseEnd)
			a.cancel(errLeaseRanOut)
		}
	}
}

// maintain runs ExpireOverdue and Reclaim at start and then every
// MaintenanceInterval (jittered) until ctx ends.
func (r *run) maintain(ctx context.Context) {
	for {
		cctx, cancel := context.WithTimeout(ctx, dbCallTimeout)
		// ExpireOverdue and Reclaim log what they changed themselves.
		if _, err := r.q.ExpireOverdue(cctx); err != nil && ctx.Err() == nil {
			r.log.Warn("expiring overdue jobs failed", "err", err)
		}
		if _, err := r.q.Reclaim(cctx); err != nil && ctx.Err() == nil {
			r.log.Warn("reclaiming abandoned attempts failed", "err", err)
		}
		cancel()
		t := time.NewTimer(jitter(r.cfg.MaintenanceInterval))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// jitter spreads d by ±20%.
func jitter(d time.Duration) time.Duration {
	if d <= 0 {
		return d
	}
	return d*4/5 + rand.N(d*2/5+1)
}
