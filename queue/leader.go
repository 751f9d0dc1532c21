package queue

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/jobqueue/jobqueue/internal/engine"
)

// Leadership (SPEC section 9). Among all the workers of one table, in any
// number of processes, at most one leads at a time: it alone runs the
// maintenance (ExpireOverdue, Reclaim, Prune) and enqueues periodic jobs.
//
// The leader holds a lease in the side table <table>_leader (one row per
// role, created by migrations.Install), renewed every LeaderLease/5. Every
// worker tries to take the lease at that pace; a statement takes it only
// when it has passed, so after a leader stops renewing (crash, kill -9,
// network partition, a paused process) another worker leads within
// LeaderLease + LeaderLease/5 (6 s by default) plus a statement's time.
//
// One clock decides: the lease is timed by the database server's clock,
// never a process's, so clock skew between machines cannot let a second
// process take a lease that the server still counts as held. The holder
// bounds its own leadership with its monotonic clock: it leads until the
// moment it SENT its last successful renewal plus LeaderLease, less a
// slack of LeaderLease/5 (and on MySQL, whose UTC_TIMESTAMP() keeps whole
// seconds, one second more). The server started that lease no earlier than
// the send, so the holder stops before the server could give the lease to
// anyone else, whatever the delays on the way. A process that was paused
// (SIGSTOP, a long GC or VM pause) finds on waking that its leadership has
// run out by its own clock and stops acting before it asks the database
// again. Every statement it sends as leader checks that it still leads
// right before it is handed to the driver, and runs under a context that
// ends with the leadership. And the database fences every act of the
// leader (fence.go): each runs in a short transaction that first checks
// the leader row for this holder and term, and holds a takeover up until
// it ends (through a second row, the role's fence row, which takeovers
// write and renewals do not: a long act never keeps its leader's renewal
// waiting), so that a statement that passed the process's check just
// before a pause changes nothing once another worker took over.

// leaderRole is the row of <table>_leader that the workers' maintenance
// role is elected through.
const leaderRole = "maintenance"

// Bounds of WorkerConfig.LeaderLease.
const (
	// DefaultLeaderLease is WorkerConfig.LeaderLease's default; a lease
	// given must be between 2 seconds and 30 minutes.
	DefaultLeaderLease = 5 * time.Second
	// MinLeaderLease is the shortest WorkerConfig.LeaderLease allowed.
	MinLeaderLease = 2 * time.Second
	// MaxLeaderLease is the longest WorkerConfig.LeaderLease allowed:
	// MySQL's statement takes it in int32 microseconds.
	MaxLeaderLease = 30 * time.Minute
)

// Leader is the row of a table's leadership as Queue.Leader reads it. Its
// times are the database server's clock, in UTC.
type Leader struct {
	// Holder names the worker that holds or last held the leadership:
	// host:pid:random, unique to one Run of one worker.
	Holder string
	// Term counts the changes of holder (and the lapses of a lease): a new
	// term starts each time a worker takes a lease that had passed. Each
	// act of the leader checks its own term in the database first, so an
	// old leader's act changes nothing once a new term began.
	Term int64
	// Since is when Holder's term began.
	Since time.Time
	// RenewedAt is when Holder last renewed its lease; LeaseUntil is when
	// the lease passes unless renewed.
	RenewedAt, LeaseUntil time.Time
	// Active is whether the lease had not passed when it was read (by the
	// server's clock): Holder leads. Inactive means no worker leads now;
	// the next worker to try takes over.
	Active bool
}

// Leader reads who leads the table's workers and since when. It returns
// nil, nil when no worker has led the table yet, and an error wrapping
// ErrSideTableMissing when the table has no <table>_leader (it was installed by
// an older version: run migrations.Install again).
func (q *Queue) Leader(ctx context.Context) (*Leader, error) {
	r, err := q.st.leaderGet(ctx, leaderRole)
	if err != nil {
		return nil, q.leaderTableError("reading the leader", err)
	}
	if r == nil || r.holder == "" {
		return nil, nil
	}
	return &Leader{
		Holder: r.holder, Term: r.term, Since: r.since, RenewedAt: r.renewedAt, LeaseUntil: r.leaseUntil,
		Active: !r.leaseUntil.Before(r.dbNow),
	}, nil
}

// leaderTableError wraps err from a statement on <table>_leader, saying to
// run Install when the side table is missing.
func (q *Queue) leaderTableError(doing string, err error) error {
	if missing, _ := missingObject(err); missing {
		name := q.table.Name
		return fmt.Errorf("%w: %s: table %q has no leader table %s_leader (it was installed by an older version); run migrations.Install(ctx, db, %q) or `jobqueue install --table %s` once (it is idempotent and keeps the jobs)",
			ErrSideTableMissing, doing, name, name, name, name)
	}
	return fmt.Errorf("jobqueue: %s: %w", doing, err)
}

// checkLeaderTable returns an error saying to run Install when the table
// has no <table>_leader. It reads the leadership's row, and exists reports
// whether the row is there, so that the elector of the Run creates it only
// when it is missing. A read, not the elector's insert: a worker's first
// claim waits for this check, and several processes that start at once on
// a new table would each wait for the one insert that wins (on SQLite for
// the write lock as well). Other failures are left to the elector, which
// tries again.
func (q *Queue) checkLeaderTable(ctx context.Context) (exists bool, err error) {
	cctx, cancel := context.WithTimeout(ctx, dbCallTimeout)
	defer cancel()
	row, err := q.st.leaderGet(cctx, leaderRole)
	if err != nil {
		if missing, _ := missingObject(err); missing {
			return false, q.leaderTableError("starting the worker", err)
		}
		return false, nil
	}
	return row != nil, nil
}

// errLeadershipEnded is the cause of a term's context once it ended.
var errLeadershipEnded = errors.New("jobqueue: this worker no longer leads")

// newHolder names one Run of a worker in <table>_leader.
func newHolder() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "unknown-host"
	}
	if len(host) > 200 {
		host = host[:200]
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%s:%d:%s", host, os.Getpid(), hex.EncodeToString(b[:]))
}

// elector takes and renews the leadership for one Run of a worker and
// tells the roles that act as leader whether they may. It owns the
// worker's row of <table>_leader and touches nothing else.
type elector struct {
	q      *Queue
	log    *slog.Logger
	holder string
	lease  time.Duration
	every  time.Duration // how often it renews, or tries to take the lease
	slack  time.Duration // taken off the local end of each lease

	mu sync.Mutex
	// until is when this process stops leading by its monotonic clock
	// (zero: it does not lead).
	until time.Time
	// term is the term of <table>_leader this process leads in, which the
	// database's fence of each act checks (fence.go).
	term int64
	// termCtx lives as long as the current term; endTerm ends it.
	termCtx context.Context
	endTerm context.CancelCauseFunc
	// expiry ends the term at until unless a renewal moved until on.
	expiry *time.Timer
	// changed is closed (and replaced) at each gain or loss.
	changed chan struct{}
	// failures tells the first failed attempt of a run of them, the one
	// logged as a warning.
	failures failureStreak
	// rowEnsured: the role's row is known to exist (Run's
	// checkLeaderTable found it), so run does not create it.
	rowEnsured bool
}

// newElector returns the elector of a worker whose leases last lease;
// rowExists tells that the role's row is known to exist.
func newElector(q *Queue, log *slog.Logger, lease time.Duration, rowExists bool) *elector {
	slack := lease / 5
	if q.kind == engine.MySQL {
		slack += time.Second // UTC_TIMESTAMP() keeps whole seconds
	}
	return &elector{
		q: q, log: log, holder: newHolder(), lease: lease, every: lease / 5, slack: slack,
		changed: make(chan struct{}), rowEnsured: rowExists,
	}
}

// leads reports whether this process leads now, by its own clock.
func (e *elector) leads() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return !e.until.IsZero() && time.Now().Before(e.until)
}

// fence returns the fence of the current term's acts and the term's
// context, and true; or false when this process does not lead.
func (e *elector) fence() (*termFence, context.Context, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.until.IsZero() || !time.Now().Before(e.until) {
		return nil, nil, false
	}
	return &termFence{holder: e.holder, term: e.term, idle: e.lease / 5, guard: e.guard}, e.termCtx, true
}

// stepDown ends the leadership of term, if this process still leads in
// it, once the database refused one of its acts (errTermEnded).
func (e *elector) stepDown(term int64) {
	e.mu.Lock()
	same := !e.until.IsZero() && e.term == term
	e.mu.Unlock()
	if same {
		e.lose(fmt.Sprintf("the database refused an act of term %d: the term ended there (another worker took over, or the lease passed by the server's clock)", term))
	}
}

// changes returns a channel that is closed at the next gain or loss of the
// leadership.
func (e *elector) changes() <-chan struct{} {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.changed
}

// notLeading is the error a leader's statement gets when the leadership
// ran out before it was sent.
var errNotLeading = errors.New("jobqueue: this worker no longer leads; the next leader takes over")

// guard returns nil while this process leads, else errNotLeading; the
// maintenance calls it before each statement.
func (e *elector) guard() error {
	if !e.leads() {
		return errNotLeading
	}
	return nil
}

// run takes or renews the lease every e.every until ctx ends, then
// releases it if held, so that another worker takes over at once. The
// release is one of the shutdown's writes: it runs on writes (the run's
// writesCtx), whose end, the shutdown's time spent, ends it. On a context
// of its own it waited up to e.every (LeaderLease/5, up to 6 minutes) for
// a leader table that another transaction held locked (on SQLite, any
// transaction that holds the write lock), after StopNow too.
func (e *elector) run(ctx, writes context.Context) {
	ensured := e.rowEnsured
	tick := time.NewTicker(e.every)
	defer tick.Stop()
	for {
		if !ensured {
			ensured = e.ensure(ctx)
		}
		if ensured {
			e.attempt(ctx)
		}
		select {
		case <-ctx.Done():
			e.release(writes)
			return
		case <-tick.C:
		}
	}
}

// ensure creates the role's row if missing, and reports whether it exists.
func (e *elector) ensure(ctx context.Context) bool {
	cctx, cancel := context.WithTimeout(ctx, max(e.every, time.Second))
	defer cancel()
	if err := retryTx(cctx, func() error { return e.q.st.leaderEnsure(cctx, leaderRole) }); err != nil {
		if ctx.Err() == nil {
			e.attemptFailed(e.q.leaderTableError("creating the leader row", err))
		}
		return false
	}
	return true
}

// attempt sends one renewal (or try to take the lease) and updates the
// leadership from its result. Each statement of the elector that loses to
// another transaction (a deadlock, a Galera certification conflict, SQLite
// busy) is sent again at once (retryTx): only one that keeps losing is a
// failed attempt (attemptFailed).
func (e *elector) attempt(ctx context.Context) {
	if !e.leads() {
		e.lose("its lease ran out by its own clock before it could renew it (renewals failed or the process was paused)")
	}
	sent := time.Now()
	e.mu.Lock()
	until := e.until
	e.mu.Unlock()
	cctx, cancel := context.WithTimeout(ctx, attemptTimeout(e.every, until, sent))
	var ok bool
	err := retryTx(cctx, func() (err error) {
		ok, err = e.q.st.leaderAcquire(cctx, leaderRole, e.holder, e.lease)
		return err
	})
	cancel()
	if err != nil {
		if ctx.Err() == nil {
			e.attemptFailed(e.q.leaderTableError("renewing the leadership", err))
		}
		return
	}
	e.failures.succeeded()
	if !ok {
		e.lose("another worker holds the lease")
		return
	}
	// Read the term this worker now holds, which every act of its checks:
	// after a gain, and after a renewal too, which starts a new term when
	// the lease had passed by the server's clock although this process, by
	// its monotonic clock, still led (the server's clock was stepped
	// forward, or this machine was suspended: Go's monotonic clock stands
	// still meanwhile). Kept in the old term, the leader's next act was
	// refused, and a periodic tick due then skipped. The row belongs to
	// another holder only if this worker lost the lease again meanwhile:
	// the next attempt tells.
	leading := e.leads()
	cctx, cancel = context.WithTimeout(ctx, max(e.every, time.Second))
	var r *leaderRow
	err = retryTx(cctx, func() (err error) {
		r, err = e.q.st.leaderGet(cctx, leaderRole)
		return err
	})
	cancel()
	switch {
	case err != nil && leading:
		// The renewal itself succeeded: lead on in the term known; an
		// act refused in it steps down (stepDown).
		r = nil
	case err != nil || r == nil || r.holder != e.holder:
		if err != nil && ctx.Err() == nil {
			e.attemptFailed(e.q.leaderTableError("reading the term just gained", err))
		}
		return
	case leading && r.term != e.currentTerm():
		e.lose(fmt.Sprintf("the database started term %d: the lease had passed by the server's clock before this renewal (the server's clock stepped forward, or this process was suspended)", r.term))
	case leading:
		r = nil // renewed in the same term
	}
	e.extend(sent.Add(e.lease-e.slack), r)
}

// currentTerm is the term this process leads in (meaningful while it
// leads).
func (e *elector) currentTerm() int64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.term
}

// attemptTimeout is how long an attempt sent at now may take when this
// process leads until until (zero: it does not lead): as long as the
// leadership has left, and at least every (and a second). A renewal cut
// off after every failed on a slow server although the lease had seconds
// left, and the next ones fared the same until it ran out; a late answer is
// still safe, since the lease it extends counts from when it was sent.
func attemptTimeout(every time.Duration, until, now time.Time) time.Duration {
	return max(every, time.Second, until.Sub(now))
}

// attemptFailed logs a failed attempt: a warning for the first of a run of
// failures, then at debug level.
func (e *elector) attemptFailed(err error) {
	if e.failures.failed() {
		e.log.Warn("leader election: the statement failed; trying again", "err", err, "retry_in", e.every)
	} else {
		e.log.Debug("leader election: the statement failed again", "err", err)
	}
}

// extend moves the local end of the leadership to until, gaining it if
// this process did not lead and r, the row read after the gain, is given.
func (e *elector) extend(until time.Time, r *leaderRow) {
	if !time.Now().Before(until) {
		return // the answer came too late (a pause): leading on it is not safe
	}
	e.mu.Lock()
	gained := e.until.IsZero()
	if gained && r == nil {
		e.mu.Unlock()
		return // it was lost meanwhile; the next attempt gains it again
	}
	if !gained && !until.After(e.until) {
		e.mu.Unlock()
		return
	}
	e.until = until
	if gained {
		e.term = r.term
		e.termCtx, e.endTerm = context.WithCancelCause(context.Background())
		close(e.changed)
		e.changed = make(chan struct{})
	}
	if e.expiry != nil {
		e.expiry.Stop()
	}
	e.expiry = time.AfterFunc(time.Until(until), e.expire)
	e.mu.Unlock()
	if gained {
		ld := &Leader{Holder: e.holder, Term: r.term, Since: r.since, RenewedAt: r.renewedAt, LeaseUntil: r.leaseUntil, Active: true}
		e.log.Info("leadership gained: this worker now runs the maintenance and the periodic jobs",
			"holder", e.holder, "term", ld.Term, "lease", e.lease)
		e.q.emit(Event{Kind: EventLeadershipGained, Leader: ld})
	}
}

// expire ends the leadership when its local end has come (the timer set by
// extend; a renewal may have moved the end on meanwhile).
func (e *elector) expire() {
	if !e.leads() {
		e.lose("its lease ran out by its own clock before a renewal succeeded")
	}
}

// lose ends the leadership, if held, saying why.
func (e *elector) lose(why string) { e.end(why, false) }

// end ends the leadership, if held, and reports whether it was; stopping
// tells a worker that stops (logged at info level) from one that lost it.
func (e *elector) end(why string, stopping bool) bool {
	e.mu.Lock()
	if e.until.IsZero() {
		e.mu.Unlock()
		return false
	}
	e.until = time.Time{}
	e.endTerm(errLeadershipEnded)
	if e.expiry != nil {
		e.expiry.Stop()
		e.expiry = nil
	}
	close(e.changed)
	e.changed = make(chan struct{})
	e.mu.Unlock()
	if stopping {
		e.log.Info("leadership given up: the worker stops", "holder", e.holder)
	} else {
		e.log.Warn("leadership lost: this worker stopped running the maintenance and the periodic jobs", "holder", e.holder, "reason", why)
	}
	e.q.emit(Event{Kind: EventLeadershipLost, Leader: &Leader{Holder: e.holder}, Err: fmt.Errorf("%w: %s", errLeadershipEnded, why)})
	return true
}

// release gives the leadership up at the end of a run, if held: it stops
// acting first, then ends its lease in the table, so that another worker
// takes over at its next try instead of once the lease has passed.
func (e *elector) release(ctx context.Context) {
	held := e.leads()
	if !e.end("the worker stopped", held) || !held {
		return
	}
	cctx, cancel := context.WithTimeout(ctx, max(e.every, time.Second))
	defer cancel()
	if err := retryTx(cctx, func() error { return e.q.st.leaderRelease(cctx, leaderRole, e.holder) }); err != nil {
		e.log.Warn("releasing the leadership failed; another worker takes over once the lease passes", "err", err)
	}
}
