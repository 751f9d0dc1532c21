package queue

// The sending side of MySQL's wake-ups across processes (see wake_mysql.go
// for the whole design): the announcer of a queue on MySQL interrupts the
// waits of the table's wake slots' holders, but its own workers'.

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jobqueue/jobqueue/db/mysqlgen"
)

// waitingSessions is the set of the session ids of a queue's waiting
// workers.
type waitingSessions struct {
	mu  sync.Mutex
	ids map[int64]bool
}

func (w *waitingSessions) add(id int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.ids == nil {
		w.ids = map[int64]bool{}
	}
	w.ids[id] = true
}

func (w *waitingSessions) remove(id int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.ids, id)
}

func (w *waitingSessions) has(id int64) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.ids[id]
}

// newMySQLWakeAnnouncer returns the announcer of q on MySQL
// (wakeOtherWorkers).
// A server that refuses user locks (a Galera node) is asked no more.
func newMySQLWakeAnnouncer(q *Queue) *announcer {
	var refused atomic.Bool
	return newAnnouncer(q.logger, "waking the idle workers of other processes", func(ctx context.Context, _ []string) error {
		if refused.Load() {
			return nil
		}
		_, err := q.wakeOtherWorkers(ctx)
		if errors.Is(err, errPollsOnly) {
			refused.Store(true)
			q.logger.Info("not waking the idle workers of other processes: they poll", "err", err)
			return nil
		}
		return err
	})
}

// holdersTTL is how long an enqueuing queue keeps the list of the wake
// slots' holders: they change only when worker processes start or stop,
// and reading them (SelectWaitingSessions) for every announcement slowed
// 16 goroutines of single Enqueue on MariaDB by 8 %. A worker process that
// starts meanwhile is woken by this queue's enqueues from the next read
// on (until then it polls); one that has stopped is read again at once.
// An empty list is kept for emptyHoldersTTL only, so that the first
// workers to start (as after a deployment) are woken within it, while an
// enqueuer with no worker running still reads them at most 20 times a
// second.
const (
	holdersTTL      = time.Second
	emptyHoldersTTL = 50 * time.Millisecond
)

// slotHolders is an enqueuing queue's list of the wake slots' holders.
type slotHolders struct {
	// ttl and emptyTTL, zero, are holdersTTL and emptyHoldersTTL (tests
	// set others).
	ttl, emptyTTL time.Duration

	mu   sync.Mutex
	ids  []int64
	read time.Time // zero: read them at the next announcement
}

// get returns the holders, reading them with read when the list is older
// than holdersTTL (emptyHoldersTTL when it was empty), and whether it read
// them.
func (h *slotHolders) get(ctx context.Context, read func(context.Context) ([]int64, error)) ([]int64, bool, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	ttl := cmp.Or(h.ttl, holdersTTL)
	if len(h.ids) == 0 {
		ttl = cmp.Or(h.emptyTTL, emptyHoldersTTL)
	}
	if !h.read.IsZero() && time.Since(h.read) < ttl {
		return h.ids, false, nil
	}
	ids, err := read(ctx)
	if err != nil {
		return nil, true, err
	}
	h.ids, h.read = ids, time.Now()
	return ids, true, nil
}

// forget makes the next get read the holders again.
func (h *slotHolders) forget() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.read = time.Time{}
}

// wakeOtherWorkers interrupts the waits of the sessions that hold a wake
// slot of the table (as read within holdersTTL), but those of q's own
// workers, and returns their ids. When a session of the list has ended
// (its worker stopped, or waits on a new session), it reads the holders
// again at once and interrupts the new ones too. A session of another
// database user, which it may not interrupt, is skipped (that worker
// polls). A queue behind a transaction pooler interrupts nothing
// (errBehindPooler).
func (q *Queue) wakeOtherWorkers(ctx context.Context) ([]int64, error) {
	if q.pooled {
		return nil, errBehindPooler
	}
	read := func(ctx context.Context) ([]int64, error) {
		return readSlotHolders(ctx, rawDBTX{r: q.run, db: q.db}, q.run.table)
	}
	var woken []int64
	done := map[int64]bool{}
	for {
		ids, fresh, err := q.holders.get(ctx, read)
		if isMySQLError(err, mysqlNotSupportedYet) {
			return nil, fmt.Errorf("%w: it refuses user locks: %v", errPollsOnly, err)
		}
		if err != nil {
			return woken, fmt.Errorf("reading the table's wake slots: %w", err)
		}
		gone := false
		for _, id := range ids {
			if done[id] || q.waiters.has(id) {
				continue
			}
			done[id] = true
			err := interruptWait(ctx, q.db, id)
			switch {
			case errors.Is(err, errWaiterGone):
				gone = true
				continue
			case isMySQLError(err, mysqlNotOwner):
				q.logger.Debug("cannot wake a worker process of another database user (KILL QUERY needs CONNECTION_ADMIN); it polls", "session", id)
				continue
			case err != nil:
				return woken, err
			}
			woken = append(woken, id)
		}
		if !gone || fresh {
			return woken, nil
		}
		q.holders.forget()
	}
}

// readSlotHolders returns the sessions that hold a wake slot of table, each
// once (SelectWaitingSessions, without its 0 for the free slots).
func readSlotHolders(ctx context.Context, db mysqlgen.DBTX, table string) ([]int64, error) {
	ids, err := mysqlgen.New(db).SelectWaitingSessions(ctx, table)
	if err != nil {
		return nil, err
	}
	held := ids[:0]
	for _, id := range ids {
		if id != 0 {
			held = append(held, id)
		}
	}
	return held, nil
}

// errBehindPooler: a queue whose connections go through a transaction
// pooler (WithTransactionPooling) sends no KILL QUERY. The ids it would
// send are the server's, and the pooler may read them as its own:
// ProxySQL answers KILL QUERY itself and stops the statement of its client
// session of that number and of the same user (lib/MySQL_Session.cpp,
// MYSQL_COM_QUERY_KILL), which can be any statement of the application.
// Workers connected directly then find the pooled queue's jobs at their
// next poll.
var errBehindPooler = fmt.Errorf("%w: the queue's connections go through a transaction pooler, which may read a server session id as one of its own client sessions (ProxySQL does), so its enqueues interrupt no wait", errPollsOnly)

// errWaiterGone: the session whose wait was to be interrupted has ended.
var errWaiterGone = errors.New("the waiting session has ended")

// interruptWait interrupts the statement of session id (KILL QUERY), the
// wait of a wake slot's holder; errWaiterGone when the session has ended.
// KILL QUERY is written here because sqlc cannot compile it with a
// parameter; id is an integer the server gave.
func interruptWait(ctx context.Context, db *sql.DB, id int64) error {
	_, err := db.ExecContext(ctx, "KILL QUERY "+strconv.FormatInt(id, 10))
	if isMySQLError(err, mysqlNoSuchThread) {
		return errWaiterGone
	}
	if err != nil {
		return fmt.Errorf("interrupting the wait of session %d: %w", id, err)
	}
	return nil
}
