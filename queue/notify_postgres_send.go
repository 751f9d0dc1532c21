package queue

// The producer side of LISTEN/NOTIFY on PostgreSQL (see notify_postgres.go
// for the whole design): pgNotifier sends, off the caller's path, the
// notifications of the enqueues a Queue commits itself, and notifyPayload
// names the jobs' type in the notification of an insert in a caller's
// transaction.

import (
	"context"
	"database/sql"
	"encoding/json"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/jobqueue/jobqueue/db/pggen"
)

// notifyTimeout bounds one NotifyTypes statement, and notifyGap is the
// least time between two of one queue: the first enqueue after a quiet
// spell is notified at once, those of a burst at most every notifyGap.
const (
	notifyTimeout = 10 * time.Second
	notifyGap     = 5 * time.Millisecond
)

// pgNotifier sends the notifications of the enqueues a Queue commits
// itself, one statement at a time and at most one per notifyGap: the types
// requested meanwhile go out together in the next one.
type pgNotifier struct {
	run     *runner
	db      *sql.DB
	log     *slog.Logger
	channel string

	mu      sync.Mutex
	pending map[string]bool
	sending bool
	// sends counts the running send goroutines, for flush.
	sends sync.WaitGroup
}

// newPGNotifier returns the notifier of q (PostgreSQL only). It starts no
// goroutine until there is something to send, and none outlives its send.
func newPGNotifier(q *Queue) *pgNotifier {
	return &pgNotifier{run: q.run, db: q.db, log: q.logger, channel: q.table.Name, pending: map[string]bool{}}
}

// request schedules a notification of typ and returns at once.
func (n *pgNotifier) request(typ string) {
	n.mu.Lock()
	n.pending[typ] = true
	if n.sending {
		n.mu.Unlock()
		return
	}
	n.sending = true
	n.sends.Add(1)
	n.mu.Unlock()
	go func() {
		defer n.sends.Done()
		n.send()
	}()
}

// inline reports whether the enqueue about to be written may notify in its
// own insert statement instead of asking for a send: yes when the notifier
// is idle (nothing sent within notifyGap, nothing pending). The NOTIFY then
// rides the enqueue's commit, so that the enqueue costs no transaction of
// its own beside the insert (the separate one, with its commit and WAL
// flush, ran while the woken workers claimed the job and slowed their
// claims: enqueue-to-start latency). It counts as the notifier's send: the
// enqueues requested within notifyGap after it go out together as during
// any burst, so that the notifying commits still do not wait for one
// another.
func (n *pgNotifier) inline() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.sending {
		return false
	}
	n.sending = true
	n.sends.Add(1)
	time.AfterFunc(notifyGap, func() {
		defer n.sends.Done()
		n.send()
	})
	return true
}

// flush waits until the notifications requested so far are sent, or ctx
// ends: a process that exits right after its last enqueue (a command-line
// tool, a short job) would otherwise leave them unsent, and workers would
// find the jobs only at their next poll.
func (n *pgNotifier) flush(ctx context.Context) {
	done := make(chan struct{})
	go func() {
		n.sends.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
	}
}

// send sends the pending types until none is left.
func (n *pgNotifier) send() {
	for {
		n.mu.Lock()
		if len(n.pending) == 0 {
			n.sending = false
			n.mu.Unlock()
			return
		}
		types := slices.Sorted(maps.Keys(n.pending))
		clear(n.pending)
		n.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), notifyTimeout)
		// Through rawDBTX: a background statement, not one of a call (the
		// statement hook of the tests counts the statements of calls).
		err := pggen.New(rawDBTX{r: n.run, db: n.db}).NotifyTypes(ctx, pggen.NotifyTypesParams{
			Channel: n.channel, Types: json.RawMessage(jsonList(types)),
		})
		cancel()
		if err != nil {
			n.log.Warn("notifying workers of enqueued jobs failed; they find the jobs at their next poll", "types", types, "err", err)
		}
		time.Sleep(notifyGap)
	}
}

// notifyEnqueued tells the workers listening anywhere that jobs of type
// typ were committed by this queue (a no-op but on PostgreSQL).
func (q *Queue) notifyEnqueued(typ string) {
	if q.notifier != nil {
		q.notifier.request(typ)
	}
}

// notifyPayload is the payload of the notification of jobs: their type,
// or empty (every worker wakes) when they have several.
func notifyPayload(jobs []*newJob) string {
	if len(jobs) == 0 {
		return ""
	}
	typ := jobs[0].typ
	for _, j := range jobs[1:] {
		if j.typ != typ {
			return ""
		}
	}
	return typ
}
