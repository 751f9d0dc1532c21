package queue

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/jobqueue/jobqueue/internal/engine"
)

// wakeHub wakes idle workers of this process at once when a job is
// enqueued here, instead of letting them wait for their next poll. Workers
// in other processes hear of it through their run's own Waker (startWaker:
// PostgreSQL's LISTEN, MySQL's wait, SQLite's watch), or at their poll.
type wakeHub struct {
	mu sync.Mutex
	ch chan struct{}
}

func newWakeHub() *wakeHub {
	return &wakeHub{ch: make(chan struct{})}
}

// wait returns a channel that is closed at the next notify.
func (h *wakeHub) wait() <-chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.ch
}

// notify wakes everyone waiting.
func (h *wakeHub) notify() {
	h.mu.Lock()
	defer h.mu.Unlock()
	close(h.ch)
	h.ch = make(chan struct{})
}

// wakeups is the channel of a Waker of the queue's own (the LISTEN of
// PostgreSQL, the wait of MySQL, the watch of SQLite), with a buffer of one: a burst of wake-ups
// becomes one.
type wakeups chan struct{}

// Wakeups returns the channel.
func (w wakeups) Wakeups() <-chan struct{} { return w }

// wake sends a wake-up without blocking.
func (w wakeups) wake() {
	select {
	case w <- struct{}{}:
	default:
	}
}

// startWaker makes own the Waker of the run (the queue's LISTEN, wait or
// watch, whose loop sends into it), forwarding into it the wake-ups of cfg.Waker,
// if one was given, and runs loop. It returns a function that stops both
// and waits until loop has returned; ctx ending stops them too.
func (r *run) startWaker(ctx context.Context, own wakeups, loop func(context.Context)) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	if user := r.cfg.Waker; user != nil {
		wg.Go(func() { forwardWakeups(ctx, user.Wakeups(), own.wake) })
	}
	wg.Go(func() { loop(ctx) })
	r.cfg.Waker = own
	return func() {
		cancel()
		wg.Wait()
	}
}

// startOwnWaker starts the queue's own Waker of its engine, which wakes an
// idle worker when other processes enqueue: PostgreSQL's LISTEN
// (startListener; cancelled hears the ids of cancelled jobs), MySQL's wait
// (startMySQLWaiter), SQLite's watch (startSQLiteWatcher). It returns the
// function that stops it.
func (r *run) startOwnWaker(ctx context.Context, cancelled func(ids []int64)) (stop func()) {
	switch r.q.kind {
	case engine.Postgres:
		return r.startListener(ctx, cancelled)
	case engine.MySQL:
		return r.startMySQLWaiter(ctx)
	default:
		return r.startSQLiteWatcher(ctx)
	}
}

// ownWakerAllowed reports whether a worker may start the queue's own Waker,
// which holds connections of the pool for good and needs the pool to allow
// at least minConns (what names it in the log: "listening for enqueues
// (LISTEN)"). Not when the worker is PollOnly; nor, logged at info level,
// when the queue runs through a transaction pooler (it keeps no session:
// the held connection would be a pooler's, shared with other clients) or
// the pool allows fewer connections.
func (r *run) ownWakerAllowed(what string, minConns int) bool {
	if r.cfg.PollOnly {
		return false
	}
	if r.q.pooled {
		r.log.Info("not " + what + ": the queue runs through a transaction pooler (see WithTransactionPooling); polling only")
		return false
	}
	if n := r.q.db.Stats().MaxOpenConnections; n > 0 && n < minConns {
		r.log.Info("not "+what+": the pool allows too few connections; polling only (raise SetMaxOpenConns, or set PollOnly)", "max_open_conns", n, "needs", minConns)
		return false
	}
	return true
}

// forwardWakeups calls wake for every value from ch until ctx ends or ch is
// closed.
func forwardWakeups(ctx context.Context, ch <-chan struct{}, wake func()) {
	for {
		select {
		case <-ctx.Done():
			return
		case _, ok := <-ch:
			if !ok {
				return
			}
			wake()
		}
	}
}

// Backoff of the sessions that wait for other processes' enqueues (LISTEN
// on PostgreSQL, a wake slot's wait on MySQL, the watch on SQLite): it
// starts at
// listenRetryMin, doubles up to listenRetryMax, and starts over once a
// session has lasted listenRetryMax.
const (
	listenRetryMin = 250 * time.Millisecond
	listenRetryMax = 30 * time.Second
)

// errPollsOnly marks a session's error that says the database cannot wake
// workers at all (a Galera node refuses the wake slots' user locks; a
// SQLite database not in WAL mode): a permanent one, logged at info level,
// not as a warning.
var errPollsOnly = errors.New("the database cannot wake idle workers")

// keepSession runs session until ctx ends, again with backoff whenever it
// fails (the worker polls meanwhile), and for good not after an error for
// which permanent reports true (a warning, or an info for errPollsOnly).
// what names the session in the log.
//
// Every MySQL wake slot of the table held by other processes
// (errNoWakeSlot) is a state of the deployment, not a failure: the worker
// polls and tries again with the backoff, since processes stop (a rolling
// deployment starts the new ones before the old ones stop), warning the
// first time and saying so at debug level after. It stopped trying for
// good there, and polled for the rest of its life.
//
// session calls up once it is established (connected, listening or
// waiting). A failure to establish it again after one that failed is
// logged at debug level, not as a warning: a database that cannot be
// reached (a restart, a failover, the network down) is told once, not at
// every try for as long as it lasts, and up then says once that the
// session is back.
func keepSession(ctx context.Context, log *slog.Logger, what string, session func(ctx context.Context, up func()) error, permanent func(error) bool) {
	delay := listenRetryMin
	toldNoSlot := false
	var failures failureStreak // the sessions that failed since the last one established
	up := func() {
		if n, _ := failures.succeeded(); n > 0 {
			log.Info(what + " again")
		}
	}
	for {
		start := time.Now()
		err := session(ctx, up)
		if ctx.Err() != nil {
			return
		}
		if errors.Is(err, errPollsOnly) {
			log.Info("not "+what+"; the worker polls only", "err", err)
			return
		}
		if permanent(err) {
			log.Warn("cannot go on "+what+"; the worker polls only", "err", err)
			return
		}
		if time.Since(start) >= listenRetryMax {
			delay = listenRetryMin
		}
		switch {
		case errors.Is(err, errNoWakeSlot) && !toldNoSlot:
			toldNoSlot = true
			log.Warn("cannot go on "+what+" for now; the worker polls meanwhile and tries again", "err", err, "retry_in", delay)
		case errors.Is(err, errNoWakeSlot):
			log.Debug("cannot go on "+what+" for now; the worker polls meanwhile and tries again", "err", err, "retry_in", delay)
		case !failures.failed():
			log.Debug(what+" failed again; the worker polls meanwhile and tries again", "err", err, "retry_in", delay)
		default:
			toldNoSlot = false
			log.Warn(what+" failed; the worker polls meanwhile and tries again", "err", err, "retry_in", delay)
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		delay = min(2*delay, listenRetryMax)
	}
}
