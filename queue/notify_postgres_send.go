package queue

// The producer side of LISTEN/NOTIFY on PostgreSQL (see notify_postgres.go
// for the whole design): pgNotifier sends, off the caller's path, the
// notifications of the enqueues a Queue commits itself, and notifyPayload
// names the jobs' type in the notification of an insert in a caller's
// transaction.

import (
	"context"
	"encoding/json"

	"github.com/jobqueue/jobqueue/db/pggen"
)

// pgNotifier sends the notifications of the enqueues a Queue commits
// itself (NotifyTypes, through its announcer), and lets the first single
// enqueue after a quiet spell notify in its own insert (inline).
type pgNotifier struct {
	*announcer
}

// newPGNotifier returns the notifier of q (PostgreSQL only).
func newPGNotifier(q *Queue) *pgNotifier {
	run, db, channel := q.run, q.db, q.table.Name
	return &pgNotifier{newAnnouncer(q.logger, "notifying workers of enqueued jobs", func(ctx context.Context, types []string) error {
		// Through rawDBTX: a background statement, not one of a call (the
		// statement hook of the tests counts the statements of calls).
		return pggen.New(rawDBTX{r: run, db: db}).NotifyTypes(ctx, pggen.NotifyTypesParams{
			Channel: channel, Types: json.RawMessage(jsonList(types)),
		})
	})}
}

// inline reports whether the enqueue about to be written may notify in its
// own insert statement instead of asking for a send: yes when the notifier
// is idle (nothing sent within announceGap, nothing pending). The NOTIFY
// then rides the enqueue's commit, so that the enqueue costs no transaction
// of its own beside the insert (the separate one, with its commit and WAL
// flush, ran while the woken workers claimed the job and slowed their
// claims: enqueue-to-start latency). It counts as the notifier's send: the
// enqueues requested within announceGap after it go out together as during
// any burst, so that the notifying commits still do not wait for one
// another.
func (n *pgNotifier) inline() bool { return n.claimSend() }

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
