package queue

// The worker's configuration: WorkerConfig with its defaults and checks
// (withDefaults), and the Waker interface a caller may set in it. Run
// (worker.go) reads it once when it starts; nothing else here runs.

import (
	"errors"
	"fmt"
	"time"
)

// WorkerConfig configures a Worker. A zero field takes the default named in
// its comment.
type WorkerConfig struct {
	// Types are the queues (the type column) the worker takes jobs from;
	// empty means every type.
	Types []string
	// Concurrency is how many handlers run at once (default 10, at most
	// MaxConcurrency). One
	// goroutine claims jobs for all of them, in batches that fill only the
	// free slots, so more concurrency does not mean more round trips.
	Concurrency int
	// Lease is how long a claimed attempt holds its job (default 5 minutes,
	// at least 1 second). Heartbeats renew it while the handler runs, and
	// after it returned until its result is written (a completion held
	// back by a slow database or tried again keeps its job); an attempt
	// whose worker vanished is reclaimed once its lease has passed.
	// When renewals fail (the database does not answer) until the lease
	// would run out before the next heartbeat, the handler's context is
	// cancelled with a cause wrapping ErrLeaseLost, so that it does not run
	// on while another worker reclaims the job; an error it then returns is
	// dropped (the job is left to Reclaim), while nil, the work done, is
	// written as the job's completion unless the job was reclaimed meanwhile.
	Lease time.Duration
	// PollInterval is how long an idle worker waits before it looks for due
	// jobs again (default 1 second), jittered by ±20% so that workers spread
	// out. An enqueue in this process, on PostgreSQL and MySQL an enqueue in
	// any process (see PollOnly), or the Waker wakes it at once.
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
	// ago. It needs the maintenance: with a negative MaintenanceInterval,
	// Run refuses it.
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
	// When the job's schedule changed since its last tick was enqueued, the
	// latest tick is made up only if the old schedule's next tick has come
	// too: a tick of the new schedule that passed while a leader of the old
	// one ran was not missed. Without it, ticks that pass while no worker
	// leads are not made up.
	RunMissed bool
	// MaxJobs, if positive, is how many jobs the worker claims in all: then
	// it claims no more, lets them finish however long they take, and Run
	// returns nil. The results still to write then (completions, failures,
	// give-backs) are written within ShutdownTimeout and 5 seconds more
	// from when the last handler returned, as at a shutdown.
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
	// would let the job run twice at once). A job the worker claimed but
	// had not started yet is given back as it was before the claim:
	// pending, its attempt not counted. These releases, give-backs,
	// completions and failures (and a leader's release of its lease) are
	// written within the same time
	// (ShutdownTimeout, then those 5 seconds; only those 5 after
	// StopNow): one that waits longer
	// (its row locked by another transaction, the database not answering)
	// is given up, its job left in_progress for Reclaim once its lease has
	// passed (a completion given up runs again).
	ShutdownTimeout time.Duration
	// Middleware wraps every handler call of this worker, inside the
	// queue's own (WithWorkMiddleware): the first given is outermost.
	Middleware []WorkMiddleware
	// Waker, if set, wakes the idle worker when jobs may be ready in other
	// processes. Enqueues in this process wake it without one, and so do
	// enqueues anywhere, on every engine (see PollOnly).
	Waker Waker
	// PollOnly turns off listening on PostgreSQL, waiting on MySQL and
	// watching on SQLite, with which an idle worker starts the jobs that
	// other processes enqueue at once instead of at its next poll. By
	// default a worker on PostgreSQL holds one connection of the queue's
	// *sql.DB for itself, LISTENs there on the channel named like the table,
	// and every enqueue (from any process, at the commit of its transaction)
	// NOTIFYs that channel with the job's type. On MySQL the worker holds
	// two connections: one holds one of the table's wake slots (user locks)
	// and waits there for a lock the other holds, and every Enqueue and
	// EnqueueMany of another process, after its commit, interrupts those
	// waits (KILL QUERY; it needs the same database user, or
	// CONNECTION_ADMIN; EnqueueTx, whose commit the queue cannot see, does
	// 5, 50 and 500 ms after the call). On SQLite (in WAL mode) the worker
	// holds one connection and reads PRAGMA data_version there every 2 ms
	// while jobs come, every 20 ms otherwise; when another connection (of
	// any process) has committed, it checks with a read whether a job of its
	// types is due, and if so claims. If a
	// connection fails, the worker polls meanwhile and tries again with
	// backoff. Set PollOnly where this cannot work, or to spare the
	// connections; the worker then finds the jobs of other processes by
	// polling. Behind a transaction pooler (PgBouncer in transaction pooling
	// mode, ProxySQL's multiplexing on MySQL, where KILL QUERY's server
	// session id would be read as one of the proxy's own client sessions)
	// give the queue WithTransactionPooling, which implies PollOnly and
	// also keeps its enqueues from sending KILL QUERY. A pool limited to one
	// connection (on MySQL: fewer than four) polls only.
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
	// MaxConcurrency is the most WorkerConfig.Concurrency allows: a worker
	// starts a goroutine per slot and sizes its buffers by it, so that a
	// mistyped figure (a million) would take the machine's memory before
	// the first job; run more worker processes for more.
	MaxConcurrency = 10000
	// DefaultLease is WorkerConfig.Lease's default.
	DefaultLease = 5 * time.Minute
	// MinLease is the shortest WorkerConfig.Lease allowed: MySQL keeps
	// whole seconds.
	MinLease = time.Second
	// DefaultPollInterval is WorkerConfig.PollInterval's default.
	DefaultPollInterval = time.Second
	// DefaultMaintenanceInterval is WorkerConfig.MaintenanceInterval's
	// default.
	DefaultMaintenanceInterval = 30 * time.Second
	// DefaultShutdownTimeout is WorkerConfig.ShutdownTimeout's default.
	DefaultShutdownTimeout = 30 * time.Second
)

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
	if c.Concurrency < 0 || c.Concurrency > MaxConcurrency {
		problems = append(problems, fmt.Errorf("Concurrency %d is out of range; use 1 to %d, or 0 for %d", c.Concurrency, MaxConcurrency, DefaultConcurrency))
	}
	if c.Lease < MinLease {
		problems = append(problems, fmt.Errorf("Lease %v is under %v (MySQL keeps whole seconds)", c.Lease, MinLease))
	}
	if c.PollInterval < 0 {
		problems = append(problems, fmt.Errorf("PollInterval %v is negative", c.PollInterval))
	}
	if c.HeartbeatInterval <= 0 || c.HeartbeatInterval >= c.Lease {
		problems = append(problems, fmt.Errorf("HeartbeatInterval %v must be positive and below Lease %v", c.HeartbeatInterval, c.Lease))
	}
	if c.LeaderLease < MinLeaderLease || c.LeaderLease > MaxLeaderLease {
		problems = append(problems, fmt.Errorf("LeaderLease %v must be between %v and %v", c.LeaderLease, MinLeaderLease, MaxLeaderLease))
	}
	if c.Retention < 0 {
		problems = append(problems, fmt.Errorf("Retention %v is negative", c.Retention))
	}
	if c.Retention > 0 && c.MaintenanceInterval < 0 {
		problems = append(problems, fmt.Errorf("Retention %v needs the maintenance, which prunes, and a negative MaintenanceInterval turns it off; leave MaintenanceInterval 0 (the default) or positive, or Retention 0", c.Retention))
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
