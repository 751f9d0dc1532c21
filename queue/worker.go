package queue

// The worker, split by role. This file holds the public face (WorkerConfig,
// Worker, Run) and the wiring of one run; each role has its own file and
// type, which names what it owns and what it may touch:
//
//	claimer.go      claimer: claims jobs into free slots, hands them out
//	executor.go     executors: run handlers, record failures, hand over successes
//	completer.go    completer: writes succeeded attempts in batches
//	heartbeat.go    heartbeater: renews leases, cancels attempts that lost their job
//	leader.go       elector: takes and renews the leadership among the table's workers
//	maintenance.go  maintainer: the leader's ExpireOverdue, Reclaim and Prune now and then
//	periodic.go     scheduler: the leader enqueues the ticks of the periodic jobs
//	shutdown.go     the end of a run: grace, cancellation, release of cut-off attempts
//	inflight.go     attempt and inflightSet: the attempts the run holds, shared by the roles

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
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
	// MaintenanceInterval is how often the leader among the table's workers
	// (see LeaderLease) runs the maintenance: ExpireOverdue, Reclaim and,
	// with a Retention, Prune, each in bounded batches (default 30 seconds;
	// negative: this worker never runs it). The leader also runs it at once
	// when it gains the leadership. A worker that does not lead runs none.
	MaintenanceInterval time.Duration
	// Retention, if positive, makes the leader's maintenance also Prune the
	// jobs that finished (completed, failed, expired) more than Retention
	// ago.
	Retention time.Duration
	// LeaderLease is the lease of the leadership among the table's workers
	// (default 5 seconds, between 2 seconds and 30 minutes): the leader
	// renews it every LeaderLease/5, and when it stops (crash, kill -9,
	// partition, pause) another worker leads within LeaderLease +
	// LeaderLease/5. Only the leader runs the maintenance and enqueues the
	// periodic jobs; a worker with MaintenanceInterval < 0 and no periodic
	// job does not take part. The lease is kept in <table>_leader, which
	// migrations.Install creates: a table installed by an older version
	// needs Install run once, else Run fails with ErrSideTableMissing.
	LeaderLease time.Duration
	// Periodic are the periodic jobs (see Periodic) that this worker
	// enqueues while it leads. Give every worker of the table the same
	// ones. Run refuses invalid ones and two with one name.
	Periodic []PeriodicJob
	// RunMissed makes a worker that gains the leadership enqueue the latest
	// tick of each periodic job that passed while no worker led (at most
	// one per job; it is a duplicate if the previous leader enqueued it).
	// Without it, ticks that pass while no worker leads are not made up.
	RunMissed bool
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
	// Wakeups returns the channel the worker waits on for wake-ups.
	Wakeups() <-chan struct{}
}

// Defaults of WorkerConfig.
const (
	// DefaultConcurrency is WorkerConfig.Concurrency's default.
	DefaultConcurrency = 10
	// DefaultLease is WorkerConfig.Lease's default.
	DefaultLease = 5 * time.Minute
	// DefaultPollInterval is WorkerConfig.PollInterval's default.
	DefaultPollInterval = time.Second
	// DefaultMaintenanceInterval is WorkerConfig.MaintenanceInterval's
	// default.
	DefaultMaintenanceInterval = 30 * time.Second
	// DefaultShutdownTimeout is WorkerConfig.ShutdownTimeout's default.
	DefaultShutdownTimeout = 30 * time.Second
)

// dbCallTimeout bounds each of the worker's own statements.
const dbCallTimeout = 30 * time.Second

// ErrWorkerShutdown is wrapped by the cause (context.Cause) of a handler's
// context that the worker cancelled because it stopped and ShutdownTimeout
// passed. A lost job cancels the context with a cause wrapping ErrLeaseLost.
var ErrWorkerShutdown = errors.New("jobqueue: worker shut down")

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
	cfg.Periodic = append([]PeriodicJob(nil), cfg.Periodic...)
	return &Worker{q: q, cfg: cfg, handlers: map[string]handlerFunc{}}
}

// AddPeriodic registers periodic jobs on the worker (see Periodic), for
// its next Run. It refuses, adding none of them, an invalid one or a name
// already registered.
func (w *Worker) AddPeriodic(jobs ...PeriodicJob) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	all := append(append([]PeriodicJob(nil), w.cfg.Periodic...), jobs...)
	if err := checkPeriodic(w.q, all); err != nil {
		return err
	}
	w.cfg.Periodic = all
	return nil
}

// leads reports whether a worker so configured takes part in the
// leadership: it runs the maintenance or has periodic jobs.
func (c WorkerConfig) leads() bool { return c.MaintenanceInterval > 0 || len(c.Periodic) > 0 }

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
	if c.LeaderLease == 0 {
		c.LeaderLease = DefaultLeaderLease
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
	if c.LeaderLease < minLeaderLease || c.LeaderLease > maxLeaderLease {
		problems = append(problems, fmt.Errorf("LeaderLease %v must be between %v and %v", c.LeaderLease, minLeaderLease, maxLeaderLease))
	}
	if c.Retention < 0 {
		problems = append(problems, fmt.Errorf("Retention %v is negative", c.Retention))
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
	if err := checkPeriodic(w.q, cfg.Periodic); err != nil {
		return err
	}
	if cfg.leads() {
		if err := w.q.checkLeaderTable(ctx); err != nil {
			return err
		}
	}
	if len(cfg.Periodic) > 0 {
		// Each tick is enqueued under a unique key.
		if err := w.q.needUnique(ctx); errors.Is(err, ErrSideTableMissing) {
			return err
		}
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

// run is one Run of a Worker: it owns the contexts and channels that join
// the roles and starts and stops them in order. One claimer (the goroutine
// of Run) feeds Concurrency executors; a completer writes their successes
// in batches; a heartbeater renews the leases of all running attempts in
// one statement; a maintainer runs ExpireOverdue and Reclaim.
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

	// attempts holds the claimed attempts not yet finished.
	attempts *inflightSet
	// released collects the attempts cut off by shutdown, to release.
	released *releaseList
}

// run starts the roles, claims until stop, then shuts down (shutdown.go)
// and returns the error of an abandoned shutdown, if any.
func (r *run) run(ctx context.Context) error {
	r.log = r.q.logger.With("component", "worker")
	r.dbCtx = context.WithoutCancel(ctx)
	r.jobs, r.cancelJobs = context.WithCancelCause(r.dbCtx)
	defer r.cancelJobs(context.Canceled)
	r.attempts = newInflightSet()
	r.released = &releaseList{}
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

	// claimer → executors, and back when a handler returned (after how
	// long): each with room for every slot and the buffer ahead of them,
	// so neither side ever waits for the other.
	held := r.cfg.Concurrency + claimAheadCap(r.cfg.Concurrency)
	work := make(chan *attempt, held)
	freed := make(chan time.Duration, held)

	// Background loops that end with the claimer.
	var bg sync.WaitGroup
	maintCtx, stopMaint := context.WithCancel(stop)
	if r.cfg.leads() {
		el := newElector(r.q, r.log, r.cfg.LeaderLease)
		bg.Go(func() { el.run(maintCtx) })
		if r.cfg.MaintenanceInterval > 0 {
			m := &maintainer{q: r.q, log: r.log, el: el, interval: r.cfg.MaintenanceInterval, retention: r.cfg.Retention}
			bg.Go(func() { m.run(maintCtx) })
		}
		if len(r.cfg.Periodic) > 0 {
			s := &scheduler{q: r.q, log: r.log, el: el, jobs: r.cfg.Periodic, runMissed: r.cfg.RunMissed}
			bg.Go(func() { s.run(maintCtx) })
		}
	}
	c := newCompleter(r.q, r.log, r.dbCtx)
	completerDone, stopCompleter := make(chan struct{}), make(chan struct{})
	go func() { defer close(completerDone); c.run(stopCompleter) }()
	ex := &executors{
		q: r.q, log: r.log, dbCtx: r.dbCtx,
		handlers: r.handlers, fallback: r.fallback,
		attempts: r.attempts, completer: c, released: r.released,
	}
	var execs sync.WaitGroup
	for range r.cfg.Concurrency {
		execs.Go(func() { ex.loop(work, freed) })
	}
	hb := &heartbeater{q: r.q, log: r.log, lease: r.cfg.Lease, interval: r.cfg.HeartbeatInterval, attempts: r.attempts, poke: make(chan struct{}, 1)}
	hbCtx, stopHeartbeats := context.WithCancel(r.dbCtx)
	hbDone := make(chan struct{})
	go func() { defer close(hbDone); hb.run(hbCtx) }()

	// PostgreSQL: LISTEN feeds the Waker, and a cancel of a job running here
	// makes the heartbeater check the leases at once.
	stopListening := r.startListener(stop, func(ids []int64) {
		if ids == nil || r.attempts.holdsAny(ids) {
			hb.checkNow()
		}
	})
	cl := &claimer{
		q: r.q, cfg: r.cfg, log: r.log, dbCtx: r.dbCtx, jobs: r.jobs,
		attempts: r.attempts, completer: c, work: work, freed: freed,
	}
	claimed := cl.loop(stop)
	stopListening()
	stopMaint()
	close(work)

	runErr := r.awaitExecutors(stop, &execs)

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

// jitter spreads d by ±20%.
func jitter(d time.Duration) time.Duration {
	if d <= 0 {
		return d
	}
	return d*4/5 + rand.N(d*2/5+1)
}
