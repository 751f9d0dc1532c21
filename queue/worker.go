package queue

// The worker, split by role. This file holds the public face (Worker,
// NewWorker, Run) and the wiring of one run; each role has its own file and
// type, which names what it owns and what it may touch:
//
//	worker_config.go  WorkerConfig, its defaults and checks, and Waker
//	claimer.go        claimer: claims jobs into free slots, hands them out
//	executor.go       executors: run handlers, record failures, hand over successes
//	completer.go      completer: writes succeeded attempts in batches
//	heartbeat.go      heartbeater: renews leases, cancels attempts that lost their job
//	leader.go         elector: takes and renews the leadership among the table's workers
//	maintenance.go    maintainer: the leader's ExpireOverdue, Reclaim and Prune now and then
//	periodic.go       scheduler: the leader enqueues the ticks of the periodic jobs
//	checkpoint.go     checkpointer: copies SQLite's WAL into the database file in the background
//	shutdown.go       the end of a run: grace, cancellation, release of cut-off attempts
//	inflight.go       attempt and inflightSet: the attempts the run holds, shared by the roles

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/jobqueue/jobqueue/internal/engine"
)

// dbCallTimeout bounds each of the worker's own statements.
const dbCallTimeout = 30 * time.Second

// rowLockWait is the longest a completion or lease renewal statement waits
// for a row that another transaction holds locked, on PostgreSQL, where
// the statement sets it as its own lock_timeout (pgLockWaitMs; a shorter
// one of the session's stays): the server then ends the wait and frees
// the rows the statement locked before that one, and the completer (the
// heartbeater) writes the batch again leaving locked rows alone. Ended by
// the client's timeout instead, the statement kept those rows until pgx's
// cancel request landed (never without cancel requests, behind
// PgBouncer): the writes that left locked rows alone, sent meanwhile,
// skipped them too, and the completer gave them up after its tries, the
// heartbeater left their leases to run out. The queue's own statements
// hold a job's row for milliseconds. MySQL cannot bound a statement's
// lock wait without one more statement (innodb_lock_wait_timeout is not
// a hint MySQL takes): its URL's innodb_lock_wait_timeout does (README,
// Running at scale).
const rowLockWait = time.Second

// ErrWorkerShutdown is wrapped by the cause (context.Cause) of a handler's
// context that the worker cancelled because it stopped and ShutdownTimeout
// passed, or because Worker.StopNow was called. A lost job cancels the
// context with a cause wrapping ErrLeaseLost.
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
	// stopNow, while a Run is in progress, ends that Run's stopNow
	// context (see StopNow); nil otherwise.
	stopNow context.CancelFunc
	// abandonGrace overrides the const of that name (tests).
	abandonGrace time.Duration
}

// NewWorker returns a worker of the queue configured by cfg. Its settings
// are checked when Run starts.
func (q *Queue) NewWorker(cfg WorkerConfig) *Worker {
	cfg.Types = append([]string(nil), cfg.Types...)
	cfg.Periodic = append([]PeriodicJob(nil), cfg.Periodic...)
	cfg.Middleware = append([]WorkMiddleware(nil), cfg.Middleware...)
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

// Run claims and runs jobs until ctx ends, MaxRuntime passes, MaxJobs jobs
// were claimed or StopNow is called. Then it stops claiming (without
// waiting for a claim in flight, which it cancels once no handler runs:
// the jobs it claims are given back, never started), lets running
// handlers finish (for up to ShutdownTimeout once
// ctx ended or MaxRuntime passed, not at all after StopNow; after that
// their contexts are cancelled), writes the results still pending (within
// that time and 5 seconds more: see ShutdownTimeout), and returns nil.
// It returns an error for an invalid configuration or when handlers ignored
// their cancelled contexts for 5 seconds (Run leaves them running). A Worker
// runs once at a time; it may Run again after Run returned.
func (w *Worker) Run(ctx context.Context) error {
	w.mu.Lock()
	if w.running {
		w.mu.Unlock()
		return errors.New("jobqueue: Worker.Run: this worker is already running")
	}
	c := w.cfg // AddPeriodic may change it while this run goes on
	// From here until Run returns, StopNow stops this run.
	stoppedNow, stopNow := context.WithCancel(context.Background())
	w.running, w.stopNow = true, stopNow
	w.mu.Unlock()
	defer func() {
		w.mu.Lock()
		w.running, w.stopNow = false, nil
		w.mu.Unlock()
		stopNow()
	}()
	cfg, err := c.withDefaults()
	if err != nil {
		return err
	}
	if err := checkPeriodic(w.q, cfg.Periodic); err != nil {
		return err
	}
	leaderRowFound := false
	if cfg.leads() {
		if leaderRowFound, err = w.q.checkLeaderTable(ctx); err != nil {
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
	r := &run{
		q:              w.q,
		cfg:            cfg,
		handlers:       maps.Clone(w.handlers),
		fallback:       w.fallback,
		abandon:        abandonGrace,
		leaderRowFound: leaderRowFound,
		stoppedNow:     stoppedNow,
	}
	if w.abandonGrace > 0 {
		r.abandon = w.abandonGrace
	}
	w.mu.Unlock()
	return r.run(ctx)
}

// StopNow stops the Worker's Run in progress at once, without the grace of
// ShutdownTimeout. Run stops claiming, as when its ctx ends, and the
// contexts of the running handlers are cancelled now, with a cause
// wrapping ErrWorkerShutdown as at the end of ShutdownTimeout (its text
// names StopNow); what follows is what follows the end of
// ShutdownTimeout: an attempt whose
// handler then returns an error is released at once by Reclaim's rule
// (pending again, its attempt counted; failed if it was its last attempt,
// expired if its deadline has passed), one whose handler returns nil is
// completed, jobs claimed and not yet started are given back (pending,
// their attempt not counted), the results are written, and Run returns nil
// (or, when handlers ignore their cancelled contexts for 5 seconds, the
// error it returns then, leaving them running).
//
// Called during the grace it ends the grace; called before ctx ends (or
// MaxRuntime passes) it stops the worker with no grace; called once the
// handlers were cancelled, or again, it does nothing more. It does not
// wait for Run to return. While no Run is in progress (before Run, after
// it returned) it does nothing, and it has no effect on a later Run. It
// is safe to call from any goroutine, at any time.
func (w *Worker) StopNow() {
	w.mu.Lock()
	stopNow := w.stopNow
	w.mu.Unlock()
	if stopNow != nil {
		stopNow()
	}
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
	// leaderRowFound: Run's check found the leadership's row.
	leaderRowFound bool
	// stoppedNow ends when Worker.StopNow is called: the run stops, with no
	// grace.
	stoppedNow context.Context

	// dbCtx is the context of the worker's own statements: it keeps ctx's
	// values but not its end, so that results are written during shutdown.
	dbCtx context.Context
	// jobs is the parent of the handlers' contexts; cancelJobs ends it at
	// shutdown.
	jobs       context.Context
	cancelJobs context.CancelCauseFunc

	// attempts holds the claimed attempts not yet finished.
	attempts *inflightSet
	// released collects the attempts cut off by shutdown, to release, and
	// those not to start, to give back (run.giveBacks).
	released *releaseList
	// budget bounds the writes of released and the completer's once the
	// run stops (see shutdownBudget); nil in runs that tests assemble.
	budget *shutdownBudget
}

// run starts the roles, claims until stop, then shuts down (shutdown.go)
// and returns the error of an abandoned shutdown, if any.
func (r *run) run(ctx context.Context) error {
	r.log = r.q.logger.With("component", "worker")
	r.dbCtx = context.WithoutCancel(ctx)
	r.jobs, r.cancelJobs = context.WithCancelCause(r.dbCtx)
	defer r.cancelJobs(context.Canceled)
	r.attempts = newInflightSet()
	r.released = newReleaseList()
	r.budget = newShutdownBudget(r.dbCtx)
	defer r.budget.close()
	if len(r.handlers) == 0 && r.fallback == nil {
		r.log.Warn("worker runs with no handler: every job it claims fails as an unknown kind")
	}

	stop := ctx
	if r.cfg.MaxRuntime > 0 {
		var cancel context.CancelFunc
		stop, cancel = context.WithTimeout(ctx, r.cfg.MaxRuntime)
		defer cancel()
	}
	if r.stoppedNow != nil {
		// StopNow stops the run as the end of ctx does (and more:
		// awaitExecutors gives no grace).
		var cancel context.CancelFunc
		stop, cancel = context.WithCancel(stop)
		defer cancel()
		defer context.AfterFunc(r.stoppedNow, cancel)()
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
		el := newElector(r.q, r.log, r.cfg.LeaderLease, r.leaderRowFound)
		bg.Go(func() { el.run(maintCtx, r.writesCtx()) })
		if r.cfg.MaintenanceInterval > 0 {
			m := &maintainer{q: r.q, log: r.log, el: el, interval: r.cfg.MaintenanceInterval, retention: r.cfg.Retention}
			bg.Go(func() { m.run(maintCtx) })
		}
		if len(r.cfg.Periodic) > 0 {
			s := &scheduler{q: r.q, log: r.log, el: el, jobs: r.cfg.Periodic, runMissed: r.cfg.RunMissed}
			bg.Go(func() { s.run(maintCtx) })
		}
	}
	if cp, ok := r.q.st.(walCheckpointer); ok && r.q.walCheckpointEvery > 0 {
		ck := &checkpointer{st: cp, log: r.log, interval: r.q.walCheckpointEvery, gate: &r.q.checkpoints}
		bg.Go(func() { ck.run(maintCtx) })
	}
	c := newCompleter(r.q, r.log, r.budget, r.attempts, completeBacklog(r.cfg.Concurrency))
	completerDone, stopCompleter := make(chan struct{}), make(chan struct{})
	go func() { defer close(completerDone); c.run(stopCompleter) }()
	ex := &executors{
		q: r.q, log: r.log, dbCtx: r.dbCtx,
		handlers: r.handlers, fallback: r.fallback,
		attempts: r.attempts, completer: c, released: r.released, budget: r.budget,
	}
	ex.work = workChain(r.log, append(append([]WorkMiddleware(nil), r.q.workMW...), r.cfg.Middleware...), ex.handle)
	giverDone, stopGiver := make(chan struct{}), make(chan struct{})
	go func() { defer close(giverDone); r.giveBacks(stopGiver) }()
	var execs sync.WaitGroup
	var startExecutor func() // also in place of one whose handler called runtime.Goexit
	startExecutor = func() { execs.Go(func() { ex.loop(work, freed, startExecutor) }) }
	for range r.cfg.Concurrency {
		startExecutor()
	}
	hb := &heartbeater{q: r.q, log: r.log, lease: r.cfg.Lease, interval: r.cfg.HeartbeatInterval, attempts: r.attempts, poke: make(chan struct{}, 1)}
	hbCtx, stopHeartbeats := context.WithCancel(r.dbCtx)
	hbDone := make(chan struct{})
	go func() { defer close(hbDone); hb.run(hbCtx) }()

	// The engine's own Waker (startOwnWaker); on PostgreSQL a cancel of a
	// job running here also makes the heartbeater check the leases at once,
	// so there it listens until the executors are done (a shutdown's grace,
	// the handlers still running after MaxJobs), not only while the
	// claimer runs: a cancel then waited for the next heartbeat.
	hearsCancels := r.q.kind == engine.Postgres
	cancelled := func(ids []int64) {
		if ids == nil || r.attempts.holdsAny(ids) {
			hb.checkNow()
		}
	}
	stopWaker := r.startOwnWaker(r.dbCtx, cancelled)
	// The Cancel calls of this queue tell the run directly, on every
	// engine and whether it listens or not (control_local.go).
	defer r.q.runs.add(cancelled)()
	// The claims' context: the shutdown's writes', ended too once no
	// handler runs after the stop (claim_late.go).
	claims, endClaims := context.WithCancelCause(r.writesCtx())
	defer endClaims(context.Canceled)
	// The context of the give-backs of claims that may have committed
	// (claimUnsure): the shutdown's writes', ended too once the run waits
	// no longer for its claim in flight (claim_late.go).
	unsureGiveBacks, endUnsureGiveBacks := context.WithCancelCause(r.writesCtx())
	defer endUnsureGiveBacks(context.Canceled)
	cl := &claimer{
		q: r.q, cfg: r.cfg, log: r.log, dbCtx: claims, giveBacks: unsureGiveBacks, jobs: r.jobs,
		attempts: r.attempts, completer: c, work: work, freed: freed,
	}
	// The claimer returns at stop without waiting for a claim in flight
	// (late), so that the grace starts, and StopNow cancels the handlers,
	// at once; what that claim takes is given back (claim_late.go).
	claimed, late := cl.loop(stop)
	if stop.Err() != nil {
		// The run stopped: its writes end within the shutdown's time,
		// and the writers' waits through an outage end now (outage).
		// awaitExecutors set it only when it saw the stop before the
		// executors' end: a run whose executors were idle could miss it,
		// and its completer then kept a result through an outage for as
		// long as the outage lasted.
		r.spendWithin(r.stopBudget())
	}
	lateDone := r.handBack(late, claims, endUnsureGiveBacks)
	if !hearsCancels {
		stopWaker()
	}
	stopMaint()
	close(work)

	runErr := r.awaitExecutors(stop, &execs)
	// No handler runs: the claim in flight, if any, is waited for no
	// longer than its cancellation takes (claim_late.go).
	endClaims(errClaimCancelledAtStop)
	if hearsCancels {
		stopWaker()
	}

	// The executors are done: what the giver has not given back is
	// written with the rest.
	close(stopGiver)
	<-giverDone
	r.releaseInterrupted()
	// What the late claim took and the giver has not given back.
	<-lateDone
	r.releaseInterrupted()
	// Every executor that finished has handed its result over: write the
	// last batch. The heartbeats go on until it is written, so that a
	// completion held back keeps its lease (inflightSet.toRenew).
	close(stopCompleter)
	<-completerDone
	stopHeartbeats()
	<-hbDone
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
