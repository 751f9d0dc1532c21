package queue

// Telling the workers of other processes about the enqueues a Queue commits
// itself, off the callers' paths: on PostgreSQL a NOTIFY
// (notify_postgres_send.go), on MySQL interrupting the waits of idle worker
// processes (wake_mysql.go). Both go through an announcer, which sends one
// announcement at a time and at most one per announceGap, so that a burst
// of enqueues costs a few statements, not one per job.

import (
	"context"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"
)

// announceTimeout bounds one announcement, and announceGap is the least
// time between two of one queue: the first enqueue after a quiet spell is
// announced at once, those of a burst at most every announceGap.
const (
	announceTimeout = 10 * time.Second
	announceGap     = 5 * time.Millisecond
)

// announcer sends the announcements of a queue's enqueues: deliver sends
// one for the job types requested since the last (sorted, without
// duplicates); a failure is logged, and the workers find the jobs at their
// next poll.
type announcer struct {
	deliver func(ctx context.Context, types []string) error
	log     *slog.Logger
	// what names the announcement in the failure's log line.
	what string

	mu      sync.Mutex
	pending map[string]bool
	sending bool
	// sends counts the running send goroutines, for flush.
	sends sync.WaitGroup
	// shots are the pending timers of requestAfterCommit, one per delay of
	// afterCommitShots, each armed for the call at armedFor; lastCall is
	// the latest call. onShot, if set, runs at each shot (this process's
	// own wake-up).
	shots    [len(afterCommitShots)]*time.Timer
	armedFor [len(afterCommitShots)]time.Time
	lastCall time.Time
	onShot   func()
}

// afterCommitShots are the delays after an enqueue in a caller's
// transaction at which requestAfterCommit requests an announcement: the
// queue cannot see that commit (database/sql has no hook for it), and an
// announcement before it wakes workers that find nothing. A transaction
// that commits within 5 ms is announced at the first, one within 50 ms at
// the second, one within half a second at the third; a later one's jobs
// are found at the workers' next poll.
var afterCommitShots = [...]time.Duration{5 * time.Millisecond, 50 * time.Millisecond, 500 * time.Millisecond}

// newAnnouncer returns an announcer that sends through deliver. It starts
// no goroutine until there is something to send, and none outlives its
// send.
func newAnnouncer(log *slog.Logger, what string, deliver func(ctx context.Context, types []string) error) *announcer {
	return &announcer{deliver: deliver, log: log, what: what, pending: map[string]bool{}}
}

// request schedules an announcement of typ and returns at once.
func (a *announcer) request(typ string) {
	a.mu.Lock()
	a.pending[typ] = true
	if a.sending {
		a.mu.Unlock()
		return
	}
	a.sending = true
	a.sends.Add(1)
	a.mu.Unlock()
	go func() {
		defer a.sends.Done()
		a.send()
	}()
}

// claimSend makes the caller's own statement count as a send (PostgreSQL's
// insert that notifies itself, pgNotifier.inline) when the announcer is
// idle: then it reports true, and the requests of the next announceGap go
// out together after it, as during any burst. When a send is under way it
// reports false, and the caller requests as usual.
func (a *announcer) claimSend() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.sending {
		return false
	}
	a.sending = true
	a.sends.Add(1)
	time.AfterFunc(announceGap, func() {
		defer a.sends.Done()
		a.send()
	})
	return true
}

// requestAfterCommit requests announcements at each of afterCommitShots
// from now, for an enqueue in a caller's transaction (MySQL, whose
// announcements name no type). A call while a shot of a delay is pending
// shares it: the shot fires for the earlier call, and is armed once more
// for the latest (rearmShot), so that every call has a shot at least each
// delay after it, and a stream of calls costs one shot per delay and
// period, no more announcements than a stream of single Enqueues.
func (a *announcer) requestAfterCommit() {
	a.mu.Lock()
	defer a.mu.Unlock()
	now := time.Now()
	a.lastCall = now
	for i, d := range afterCommitShots {
		if a.shots[i] == nil {
			a.armShot(i, now, d)
		}
	}
}

// armShot arms shot i, of delay d, for the call at call (a.mu held).
func (a *announcer) armShot(i int, call time.Time, d time.Duration) {
	a.armedFor[i] = call
	a.shots[i] = time.AfterFunc(max(time.Until(call.Add(d)), 0), func() {
		a.mu.Lock()
		if again, ok := rearmShot(a.armedFor[i], a.lastCall); ok {
			a.armShot(i, again, d)
		} else {
			a.shots[i] = nil
		}
		a.mu.Unlock()
		a.shot()
	})
}

// rearmShot is the rule of a shot that fires: armed for the call at
// armedFor, it is armed again for the latest call when one came after
// (ok), else it ends.
func rearmShot(armedFor, lastCall time.Time) (call time.Time, ok bool) {
	if lastCall.After(armedFor) {
		return lastCall, true
	}
	return time.Time{}, false
}

// shot is a shot of requestAfterCommit: onShot, and an announcement.
func (a *announcer) shot() {
	if a.onShot != nil {
		a.onShot()
	}
	a.request("")
}

// flush waits until the announcements requested so far are sent, or ctx
// ends: a process that exits right after its last enqueue (a command-line
// tool, a short job) would otherwise leave them unsent, and workers would
// find the jobs only at their next poll. The pending shots of
// requestAfterCommit are sent at once (the caller's transactions have
// ended by now).
func (a *announcer) flush(ctx context.Context) {
	a.mu.Lock()
	fire := false
	for i, t := range a.shots {
		if t != nil && t.Stop() {
			a.shots[i] = nil
			fire = true
		}
	}
	a.mu.Unlock()
	if fire {
		a.shot()
	}
	done := make(chan struct{})
	go func() {
		a.sends.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
	}
}

// send sends the pending types until none is left, announceGap apart.
func (a *announcer) send() {
	for {
		a.mu.Lock()
		if len(a.pending) == 0 {
			a.sending = false
			a.mu.Unlock()
			return
		}
		types := slices.Sorted(maps.Keys(a.pending))
		clear(a.pending)
		a.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), announceTimeout)
		err := a.deliver(ctx, types)
		cancel()
		if err != nil {
			a.log.Warn(a.what+" failed; they find the jobs at their next poll", "types", types, "err", err)
		}
		time.Sleep(announceGap)
	}
}

// notifyCallersCommit tells the workers of other processes, on MySQL, of
// jobs enqueued in a caller's transaction, after its commit as best it can
// (announcer.requestAfterCommit). On PostgreSQL the insert itself notifies
// at that commit; SQLite's workers poll.
func (q *Queue) notifyCallersCommit() {
	if q.txAnnouncer != nil {
		q.txAnnouncer.requestAfterCommit()
	}
}

// notifyEnqueued tells the workers of other processes that jobs of type typ
// were committed by this queue: on PostgreSQL by NOTIFY, on MySQL by
// interrupting the waits of their idle worker processes; a no-op on
// SQLite.
func (q *Queue) notifyEnqueued(typ string) {
	if q.announcer != nil {
		q.announcer.request(typ)
	}
}
