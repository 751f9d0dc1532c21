package queue

// Wake-ups across processes on MySQL and MariaDB. MySQL has no LISTEN, so
// an idle worker in another process than the enqueue used to find the job
// at its next poll (PollInterval; a p50 enqueue-to-start of about half a
// second with the default of 1 second). Instead, while a Worker runs on
// MySQL (unless WorkerConfig.PollOnly), it takes two connections of the
// queue's *sql.DB for itself:
//   - the waiting one takes one of the table's wake slots (TakeWakeSlot: a
//     user lock named after the database, the table and the slot's number,
//     0 to wakeSlots-1), which it holds as long as it lives;
//   - the other takes the slot's bell (TakeWakeBell, a user lock named
//     likewise) and does nothing else but read whether each wait has
//     begun (below);
//   - the waiting one waits for the bell (WaitForEnqueues, GET_LOCK with a
//     timeout of 10 seconds), again and again;
//   - each time a wait has begun (WaitsForLock, read on the bell's
//     connection), the waiter wakes its worker, which claims.
//
// An enqueue that the queue commits itself (Enqueue, EnqueueMany) asks the
// queue's announcer (announce.go) right after its commit, one in a
// caller's transaction (EnqueueTx, EnqueueManyTx), whose commit the queue
// cannot see, 5, 50 and 500 ms after the call (requestAfterCommit). The
// announcer, off the caller's path and at most once per announceGap,
// interrupts with KILL QUERY the waits of the sessions that hold the
// table's wake slots (SelectWaitingSessions: IS_USED_LOCK of each, read
// again after holdersTTL). The interrupted wait returns NULL (MySQL)
// or fails with error 1317 (MariaDB); the worker then claims at once, and
// waits again. The wake-up is a hint, as a notification is on PostgreSQL.
// The wait is for a lock, not SLEEP: on MariaDB 10.11, a KILL QUERY of one
// of several sessions in SLEEP at once took 2 seconds now and then (4 of
// 900 in a loop that interrupted three of them every 10 ms), never one of
// sessions waiting for a user lock (0 of 900, at most 2.3 ms).
//
// The sending side is in wake_mysql_send.go, this file holds the worker's.
//
// The ids come from the slots' holders, and only a waiting connection holds
// a slot: a KILL QUERY never reaches another statement of the worker's.
// A KILL QUERY that reaches the holder between two waits (after one has
// returned, before the next has begun: a round trip every 10 seconds, and
// after each interruption) is lost: the server forgets it when the next
// statement starts. So the waiter wakes its worker not when a wait
// returns, but once the next wait has begun: the claim then sees every job
// whose enqueue's interruption came before that wait began (the enqueue
// commits before it interrupts), and the wait hears every later one. A
// wait that runs out thus costs a claim every 10 seconds, 10 % of what the
// worker's polls cost at the default PollInterval. The worker finds the
// job at its next poll when every slot is taken (more than wakeSlots worker processes on one
// table), when the wait cannot start (a connection fails: it tries again
// with backoff; the server refuses user locks, as a Galera node does: it
// polls only), and when the enqueue's user may not interrupt the
// worker's session (KILL QUERY of another user's session needs the
// CONNECTION_ADMIN or SUPER privilege; MySQL error 1095). The enqueue's
// own queue does not interrupt its workers' waits (Queue.waiters): it
// wakes them directly.
//
// When the worker stops, it interrupts its own wait through the pool and
// then closes the connections, which gives the slot and the bell back. A
// crashed worker's are free once the server sees its connections end; a
// wait whose bell is free takes it (1): its bell's holder has ended, and
// the session starts over.

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/jobqueue/jobqueue/db/mysqlgen"
)

// wakeSlots is how many wake slots a table has (SelectWaitingSessions
// reads slots 0 to 63).
const wakeSlots = 64

// MySQL server errors of the wake-ups.
const (
	mysqlQueryInterrupted = 1317 // ER_QUERY_INTERRUPTED: a wait was interrupted (MariaDB)
	mysqlNoSuchThread     = 1094 // ER_NO_SUCH_THREAD: the session ended meanwhile
	mysqlNotOwner         = 1095 // ER_KILL_DENIED_ERROR: another user's session
)

// waiterMinConns is the smallest limit of the pool's connections
// (SetMaxOpenConns) with which a worker waits: the wait holds two for good,
// and the claims, completions and heartbeats need the others.
const waiterMinConns = 4

// waitInterruptGrace is how long a stopping worker's wait may take to
// return after it was interrupted before its connection is closed under
// it.
const waitInterruptGrace = time.Second

// errNoWakeSlot: every wake slot of the table is held; the worker polls,
// and tries again with the backoff (keepSession).
var errNoWakeSlot = fmt.Errorf("all %d wake slots of the table are held by other worker processes", wakeSlots)

// mysqlWaiter is the Waker of a worker on MySQL: it waits on a wake slot's
// connection and turns each interrupted wait into a wake-up.
type mysqlWaiter struct {
	q   *Queue
	log *slog.Logger
	wakeups
	// askedGalera: a session of the waiter has asked the server whether it
	// is a Galera node (and said so if it is).
	askedGalera bool
}

// startMySQLWaiter starts, for a worker on MySQL that is not PollOnly, not
// behind a transaction pooler, and whose pool allows waiterMinConns
// connections or more (ownWakerAllowed), the waiter, and makes it the Waker
// of the run (forwarding the wake-ups of cfg.Waker, if one was given, into
// it). It returns a function that stops the waiter and waits until its
// connection is closed. ctx ending stops it too.
func (r *run) startMySQLWaiter(ctx context.Context) (stop func()) {
	if !r.ownWakerAllowed("waiting for the enqueues of other processes", waiterMinConns) {
		return func() {}
	}
	w := &mysqlWaiter{q: r.q, log: r.log, wakeups: make(wakeups, 1)}
	return r.startWaker(ctx, w.wakeups, func(ctx context.Context) {
		keepSession(ctx, w.log, "waiting for the enqueues of other processes", w.session, func(error) bool { return false })
	})
}

// session takes two connections, a wake slot on one and the slot's bell
// on the other, and waits for the bell on the first, turning interrupted
// waits into wake-ups, until ctx ends or a connection fails. The
// connections are discarded afterwards, which gives the slot and the bell
// back.
func (w *mysqlWaiter) session(ctx context.Context, up func()) error {
	conns := make([]*sql.Conn, 0, 2)
	defer func() {
		for _, c := range conns {
			discardConn(c)
		}
	}()
	cctx, cancel := context.WithTimeout(ctx, dbCallTimeout)
	defer cancel()
	for range 2 {
		conn, err := w.q.db.Conn(cctx)
		if err != nil {
			return fmt.Errorf("taking a connection: %w", err)
		}
		conns = append(conns, conn)
	}
	waiting := mysqlgen.New(rawDBTX{r: w.q.run, db: conns[0]})
	slot, id, err := w.takeSlot(cctx, waiting)
	if err != nil {
		return err
	}
	key := mysqlgen.TakeWakeBellParams{TableName: w.q.run.table, Slot: slot}
	// Not taken, the bell has another holder (a crashed worker's session
	// the server has not yet seen end), which serves as well.
	if _, err := mysqlgen.New(rawDBTX{r: w.q.run, db: conns[1]}).TakeWakeBell(cctx, key); err != nil {
		return fmt.Errorf("taking the wake slot's bell: %w", err)
	}
	// The bell's session runs nothing but a read as each wait begins
	// (waitBegun), at least every 10 s, and waits (a test's hour) may be
	// longer than a server's wait_timeout: give it the longest idle
	// timeout (session control, on a connection that is
	// discarded afterwards). A server whose wait_timeout is short ended it,
	// which freed the bell and ended the wait: a warning and a spell of
	// polling every wait_timeout.
	if _, err := conns[1].ExecContext(cctx, "SET SESSION wait_timeout = 31536000"); err != nil {
		return fmt.Errorf("keeping the wake slot's bell (SET SESSION wait_timeout): %w", err)
	}
	if !w.askedGalera {
		// A Galera node takes user locks as its own, not the cluster's:
		// the enqueues of processes on other nodes see no wake slot of
		// this worker, which finds their jobs at its next poll. Said
		// once, at info level: it is how the cluster works.
		var wsrep int
		err := conns[0].QueryRowContext(cctx, "SELECT @@wsrep_on").Scan(&wsrep)
		switch {
		case isMySQLError(err, mysqlUnknownSystemVariable):
			// MySQL without Galera.
		case err != nil:
			return fmt.Errorf("asking whether the server is a Galera node (SELECT @@wsrep_on): %w", err)
		case wsrep == 1:
			w.log.Info("waiting for the enqueues of processes on this Galera node only: user locks (GET_LOCK) are per node, so enqueues on other nodes do not wake this worker, which finds their jobs at its next poll (PollInterval)")
		}
		w.askedGalera = true
	}
	cancel()
	w.q.waiters.add(id)
	defer w.q.waiters.remove(id)
	w.log.Debug("waiting for the enqueues of other processes", "session", id, "slot", slot)
	up()

	// The waits run under waitCtx, not ctx: ending ctx interrupts the wait
	// through the pool, and closes the connection only if that has not
	// ended it within waitInterruptGrace.
	waitCtx, cancelWait := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelWait()
	defer context.AfterFunc(ctx, func() {
		kctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), waitInterruptGrace)
		defer cancel()
		if err := interruptWait(kctx, w.q.db, id); err != nil && !errors.Is(err, errWaiterGone) {
			// The grace below ends the wait; the server's thread waits on
			// until the wait's end.
			w.log.Debug("interrupting the wait of a stopping worker", "err", err)
		}
		time.AfterFunc(waitInterruptGrace, cancelWait)
	})()

	params := mysqlgen.WaitForEnqueuesParams{TableName: key.TableName, Slot: key.Slot, Seconds: cmp.Or(w.q.mysqlWaitSeconds, mysqlWaitSeconds)}
	for {
		done := make(chan waitResult, 1)
		go func() {
			outcome, err := waiting.WaitForEnqueues(waitCtx, params)
			done <- waitResult{outcome, err}
		}()
		// Jobs enqueued while nobody waited (before the first wait, or
		// between two) were not announced here, or their interruption was
		// lost: claim once the wait has begun.
		r, ended, err := w.waitBegun(ctx, conns[1], id, done)
		if err != nil {
			// A stopping worker's wait is interrupted (above); another
			// one is ended by closing its connection.
			if ctx.Err() == nil {
				cancelWait()
			}
			<-done
			return err
		}
		if ctx.Err() == nil {
			w.wake()
		}
		if !ended {
			r = <-done
		}
		switch {
		case ctx.Err() != nil:
			return nil
		case r.err == nil && r.outcome == 1:
			return errors.New("the wake slot's bell was free: its session has ended")
		case r.err != nil && !isMySQLError(r.err, mysqlQueryInterrupted):
			return fmt.Errorf("waiting: %w", r.err)
		}
		// The wait ran out or was interrupted: the worker is woken once
		// the next has begun.
		if h := w.q.betweenWaits; h != nil {
			h(r.outcome)
		}
	}
}

// mysqlWaitSeconds is how long each wait of the waiter lasts.
const mysqlWaitSeconds = 10

// waitResult is what a wait (WaitForEnqueues) returned.
type waitResult struct {
	outcome int64
	err     error
}

// waitBegun returns once the session id (the waiting connection) waits
// for its bell, as read on bell, the bell's connection; or, with ended
// true, once the wait has already returned, with what it returned (done).
// It reads again at growing intervals, from 100 µs up to 20 ms: the wait
// was sent before, and has mostly begun by the first read. After a second
// of reads that do not see it (a server that names the state otherwise) it
// returns as if it had begun. It returns ctx's error when ctx ends, and the
// read's error when it fails.
func (w *mysqlWaiter) waitBegun(ctx context.Context, bell *sql.Conn, id int64, done <-chan waitResult) (r waitResult, ended bool, err error) {
	delay := 100 * time.Microsecond
	for start := time.Now(); ; {
		if time.Since(start) > time.Second {
			w.log.Debug("the wait was not seen to begin (information_schema.PROCESSLIST, state 'User lock'); waking the worker anyway", "session", id)
			return waitResult{}, false, nil
		}
		select {
		case r := <-done:
			return r, true, nil
		default:
		}
		if ctx.Err() != nil {
			return waitResult{}, false, ctx.Err()
		}
		cctx, cancel := context.WithTimeout(ctx, dbCallTimeout)
		var n int64
		// Written here: sqlc's catalog has no information_schema.
		err := bell.QueryRowContext(cctx, "SELECT /* WaitsForLock */ COUNT(*) FROM information_schema.PROCESSLIST WHERE ID = ? AND STATE = 'User lock'", id).Scan(&n)
		cancel()
		if err != nil {
			return waitResult{}, false, fmt.Errorf("reading whether the wait has begun: %w", err)
		}
		if n > 0 {
			return waitResult{}, false, nil
		}
		t := time.NewTimer(delay)
		select {
		case r := <-done:
			t.Stop()
			return r, true, nil
		case <-ctx.Done():
			t.Stop()
		case <-t.C:
		}
		delay = min(2*delay, 20*time.Millisecond)
	}
}

// takeSlot takes a free wake slot of the table for the session of gen,
// trying them from a random one on, and returns the slot and the session's
// id; or errNoWakeSlot.
func (w *mysqlWaiter) takeSlot(ctx context.Context, gen *mysqlgen.Queries) (slot, id int64, err error) {
	first := rand.IntN(wakeSlots)
	for i := range wakeSlots {
		slot := int64((first + i) % wakeSlots)
		r, err := gen.TakeWakeSlot(ctx, mysqlgen.TakeWakeSlotParams{TableName: w.q.run.table, Slot: slot})
		if isMySQLError(err, mysqlNotSupportedYet) {
			return 0, 0, fmt.Errorf("%w: it refuses user locks (GET_LOCK, as a Galera node does): %v", errPollsOnly, err)
		}
		if err != nil {
			return 0, 0, fmt.Errorf("taking a wake slot: %w", err)
		}
		if r.Taken == 1 {
			return slot, r.SessionID, nil
		}
	}
	return 0, 0, errNoWakeSlot
}
