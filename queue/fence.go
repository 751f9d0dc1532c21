package queue

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/jobqueue/jobqueue/internal/engine"
)

// The fences of a leader's acts (leader.go). Two of them:
//
// In the process: every generated statement sent under a context with a
// fence (withFence) asks it right before it is handed to database/sql
// (dbtx.go), so that a worker whose leadership ran out by its own clock
// sends nothing more as leader, whichever statement it was about to send.
//
// In the database: each act of the leader — one batch of ExpireOverdue or
// Prune, one round of Reclaim, one tick's enqueue — is one short
// transaction whose first statement (FenceLeaderAct) checks that the
// worker still holds the leadership in its own term, with a lease that has
// not passed by the server's clock, and locks the role's fence row
// (fenceRowName, leader_takeover.go) until the transaction ends:
// PostgreSQL reads it FOR SHARE; MySQL writes it (renewals + 1), since
// MariaDB Galera replicates no row locks, only the keys of the rows a
// transaction wrote; SQLite takes the database's write lock. The role's
// own row, which holds the lease, is read, never locked. Every takeover
// increments the term and writes both rows, one statement after the other
// (acquireLeader): the fence row's write waits for an act in flight; an
// act that begins after a takeover finds another term and changes nothing.
// So no act of an old leader lands after a new leader's term began, even
// one whose statements passed the process's fence just before a pause
// (SIGSTOP, GC, VM). An old leader paused inside its act would keep the
// takeover waiting; the server ends its session instead once it sits idle
// for a fifth of the lease (PostgreSQL: idle_in_transaction_session_timeout,
// MySQL: wait_timeout, both for that act only), and the act rolls back.
//
// Why two rows. The leader renews its lease every fifth of it; when the
// acts locked the row the renewal writes (one row held both), a renewal
// waited for the act in flight, and an act that lasted longer than about
// 0.6 of the lease (a tick's enqueue held up by another transaction's
// unique key, a statement held up by a lock) cost the leader its
// leadership: the lease ran out by its own clock, the act was cancelled,
// and the next renewal took the leadership again, running the pass again
// (TestLongActKeepsLeadership). A renewal in the same term writes only the
// role's row, which no act locks, and finds the fence row up to date, so
// it waits for nothing. The other ways weighed: PostgreSQL's FOR KEY SHARE
// for the acts, which an UPDATE of non-key columns does not wait for,
// needs the takeover to lock FOR UPDATE on its own and has no MySQL
// counterpart (InnoDB has shared and exclusive row locks only, and a
// multi-table UPDATE or a subquery reads the other row with a shared lock
// even at READ COMMITTED, measured on MariaDB 10.11); checking the term at
// the act's commit instead of at its start lets an act of an ended term
// run to its end and lets a takeover through while an act is in flight
// (TestTakeoverWaitsForAct); bounding every act below the lease would cut
// off an act that is merely slow, and retry it no faster. On Galera the
// two rows keep the certification conflict that fences acts across nodes:
// a takeover's write set holds the fence row's key, as each act's does;
// a renewal's holds only the role's row, as no act's does.
//
// SQLite has one writer: an act holds the database's write lock from its
// first statement to its commit, and every other write, the leader's own
// renewal included, waits for it. The two rows change nothing there: an
// act that holds the write lock longer than about 0.6 of the lease still
// costs its leader the leadership, as it keeps every worker's claims and
// completions waiting too. Acts are bounded (batches, a tick's one
// enqueue): an enqueue middleware that blocks inside a tick's enqueue is
// what makes one that long. SQLite has no server to end a session
// either: a process paused inside any transaction holds the write lock
// until it resumes, then commits what it began while it led; the takeover
// follows.
//
// Workers of an older version, which know only the role's row, lock it in
// their acts and write only it when they take over: a takeover by this
// version still waits for their acts (it writes the role's row too), but
// one of theirs does not wait for an act of this version in flight. Run
// one version per table when leaders may be paused or cut off while a
// rolling upgrade is under way.
//
// On Galera a takeover on another node does not wait for an act in flight
// on this one: each node commits its own and the cluster certifies the
// write sets in one order. Both write the fence row, so whichever of the
// two comes second is refused (error 1213): a takeover is tried again by
// the elector, an act by leaderAct's retry, whose fence then finds the
// term ended (errTermEnded). Without the write (a locking read) an act
// whose commit was ordered after a takeover that its node had not applied
// yet passed certification and landed in the new term
// (TestGaleraFenceAcrossNodes). On a single MySQL server the write costs
// what the locking read did, one statement per act (and a read of the
// role's row, which locks nothing), but two acts of one leader (its
// maintenance and a periodic tick) take turns on the fence row instead of
// sharing it: one waits at most for the other's short transaction.

// fenceKey is the context key of a fence.
type fenceKey struct{}

// withFence returns ctx with a fence: guard returns an error once the
// statements must stop.
func withFence(ctx context.Context, guard func() error) context.Context {
	return context.WithValue(ctx, fenceKey{}, guard)
}

// fenced returns the fence's error when ctx has a fence that is closed.
func fenced(ctx context.Context) error {
	if guard, ok := ctx.Value(fenceKey{}).(func() error); ok {
		return guard()
	}
	return nil
}

// fencedContext reports whether ctx carries a fence (a leader's act): its
// statements must check it, so they are not combined with others'.
func fencedContext(ctx context.Context) bool {
	_, ok := ctx.Value(fenceKey{}).(func() error)
	return ok
}

// termFence is what a leader's act checks in the database: the holder and
// term it acts for. guard is the process's check (elector.guard); idle is
// how long the act's session may sit idle before the server ends it.
type termFence struct {
	holder string
	term   int64
	idle   time.Duration
	guard  func() error
}

// errTermEnded is the error of an act that the database refused: the
// worker's term ended there.
var errTermEnded = errors.New("jobqueue: the database refused the leader's act: this worker's term has ended there (another worker took over, or the lease passed by the server's clock); nothing was changed and the worker steps down")

// leaderAct runs fn as one act of the leader fenced by f: in a transaction
// of its own whose first statement is the database's fence (see above),
// committed when fn returns nil; errTermEnded, with nothing changed, when
// the fence refuses it. A deadlock (MySQL) or a busy database (SQLite)
// runs the whole act again, a few times. With f nil (the manual commands:
// ExpireOverdue, Reclaim, Prune called by hand, the CLI, the dashboard)
// fn runs on the pool, each statement its own transaction, and fn runs
// again likewise when a statement loses a deadlock (also how a Galera
// node reports a certification conflict, which the server retries for no
// statement in an explicit transaction): what its earlier statements
// committed stays, and the run again finds the rest.
func (q *Queue) leaderAct(ctx context.Context, f *termFence, fn func(d dbtx) error) error {
	if f == nil {
		return retryTx(ctx, func() error { return fn(q.run.on(nil)) })
	}
	return q.leaderActAt(ctx, f, func(d dbtx, _ time.Time) error { return fn(d) })
}

// leaderActAt is leaderAct for an act fenced by f (not nil) that needs the
// database server's clock: fn gets the time the fence statement read on
// the server, so that the act costs no round trip more to learn it.
func (q *Queue) leaderActAt(ctx context.Context, f *termFence, fn func(d dbtx, serverNow time.Time) error) error {
	return retryTx(ctx, func() error { return q.leaderActOnce(ctx, f, fn) })
}

// leaderActOnce is one try of leaderActAt.
func (q *Queue) leaderActOnce(ctx context.Context, f *termFence, fn func(d dbtx, serverNow time.Time) error) error {
	if err := f.guard(); err != nil {
		return err
	}
	c, err := q.db.Conn(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	var opts *sql.TxOptions
	if q.kind == engine.MySQL {
		// Session control, not a query of the table (like connTx's
		// BEGIN IMMEDIATE): sqlc generates no SET statement. The session
		// gets the server's wait_timeout back after the act, or is
		// discarded.
		secs := max(int64(f.idle/time.Second), 1)
		if _, err := c.ExecContext(ctx, fmt.Sprintf("SET SESSION wait_timeout = %d", secs)); err != nil {
			return err
		}
		defer func() {
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), newTimeout)
			defer cancel()
			if _, err := c.ExecContext(rctx, "SET SESSION wait_timeout = DEFAULT"); err != nil {
				spoilConn(c) // closed, not handed back, when the deferred Close runs
			}
		}()
		// As the maintenance statements on their own (mysqlStore.readCommitted):
		// REPEATABLE READ's gap locks would hold enqueues up.
		opts = &sql.TxOptions{Isolation: sql.LevelReadCommitted}
	}
	tx, err := c.BeginTx(ctx, opts)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	d := q.run.on(tx)
	ok, serverNow, err := q.st.leaderFence(ctx, d, leaderRole, f.holder, f.term, f.idle)
	if err != nil {
		return err
	}
	if !ok {
		return errTermEnded
	}
	if err := fn(d, serverNow); err != nil {
		return err
	}
	return tx.Commit()
}
