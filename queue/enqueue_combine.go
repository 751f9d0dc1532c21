package queue

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// Combining single enqueues. Each Enqueue on its own is a statement that
// commits on its own: a round trip and, on PostgreSQL, a WAL flush per job.
// When many goroutines of a process enqueue at once, the combiner lets at
// most combineSlots of those statements run at a time; the Enqueues that
// arrive while they all run wait, and go together in one multi-row
// statement (one round trip, one commit) as soon as a slot frees up, each
// caller then getting its own id. A lone Enqueue, or a few at once, never
// waits: it writes at once, as without the combiner.
//
// A combined statement that the server refuses (a payload it does not
// take, say) wrote nothing, and each of its jobs is then written on its
// own, so that each caller gets its own result as if it had written alone.
// A combined statement whose outcome is unknown (the connection broke, or
// its timeout passed, once it was sent) may have committed: each of its
// callers gets the error, as a single Enqueue would, and no job is written
// again (which would write it twice). The
// statement runs under its own timeout, not under any caller's deadline or
// cancellation: a caller whose context ends while its job waits gets the
// context's error and its job is not written; once the job's statement is
// sent, the caller waits for its result. It carries the values of its
// first caller's context (context.WithoutCancel), so that where the pool
// is instrumented its trace span is that caller's child; a job written
// alone after a failed combined statement carries its own caller's.
//
// Measured with bench --enqueuers 16 on PostgreSQL, 6 rounds alternating:
// 8.2k-10.3k jobs/s against 4.0k-5.1k without; 2 slots did better at 16
// goroutines but worse than none at 4, 8 slots worse (docs/performance.md).
const (
	// combineSlots is how many enqueue statements of a queue run at once
	// before the next Enqueues wait to be combined.
	combineSlots = 4
	// combineMax is the most jobs, and combineMaxBytes about the most
	// payload bytes, of one combined statement.
	combineMax      = 100
	combineMaxBytes = 1 << 20
)

// errBatchNotSent marks the failure of a combined statement that was not
// sent: nothing was written.
var errBatchNotSent = errors.New("jobqueue: internal: the combined statement was not sent")

// batchRefused reports whether err, the failure of a combined statement,
// says that nothing was written, so that its jobs may be written again
// one by one: the statement was not sent, or the server refused it (a
// statement committed on its own commits whole or not at all, and the
// server's error says it did not). Any other failure (the connection
// broke, the timeout passed) leaves the outcome unknown.
func batchRefused(err error) bool {
	var pgErr *pgconn.PgError
	return errors.Is(err, errBatchNotSent) || errors.As(err, &pgErr)
}

// batchInserter is a store that writes jobs of several callers in one
// statement committed on its own, returning their ids in order (PostgreSQL).
type batchInserter interface {
	insertBatch(ctx context.Context, jobs []*newJob, now time.Time) ([]int64, error)
}

// enqueueCombiner combines the single enqueues of one queue (see above).
type enqueueCombiner struct {
	batch  func(ctx context.Context, jobs []*newJob, now time.Time) ([]int64, error)
	now    func() time.Time
	single func(ctx context.Context, j *newJob) (int64, error) // one job alone, under ctx

	mu      sync.Mutex
	running int            // statements in flight, at most combineSlots
	waiting []*combinedJob // in arrival order
}

// combinedJob is one waiting Enqueue.
type combinedJob struct {
	ctx  context.Context // the caller's: its values, not its cancellation, go with the statement
	j    *newJob
	sent bool          // taken into a statement (under the combiner's mutex)
	done chan struct{} // closed once id and err are set
	id   int64
	err  error
}

// enqueue writes j: at once through alone when a slot is free, else
// together with the others waiting.
func (c *enqueueCombiner) enqueue(ctx context.Context, j *newJob, alone func() (int64, error)) (int64, error) {
	c.mu.Lock()
	if c.running < combineSlots {
		c.running++
		c.mu.Unlock()
		id, err := alone()
		c.release()
		return id, err
	}
	w := &combinedJob{ctx: ctx, j: j, done: make(chan struct{})}
	c.waiting = append(c.waiting, w)
	c.mu.Unlock()
	select {
	case <-w.done:
		return w.id, w.err
	case <-ctx.Done():
	}
	c.mu.Lock()
	if !w.sent {
		if i := slices.Index(c.waiting, w); i >= 0 {
			c.waiting = slices.Delete(c.waiting, i, i+1)
		}
		c.mu.Unlock()
		return 0, ctx.Err() // not written
	}
	c.mu.Unlock()
	<-w.done // sent: its statement decides
	return w.id, w.err
}

// release frees the slot of a statement that returned; when Enqueues wait,
// the slot goes at once to a statement of them (as many as fit).
func (c *enqueueCombiner) release() {
	c.mu.Lock()
	if len(c.waiting) == 0 {
		c.running--
		c.mu.Unlock()
		return
	}
	n, bytes := 0, 0
	for n < len(c.waiting) && n < combineMax && (n == 0 || bytes+len(c.waiting[n].j.payload) <= combineMaxBytes) {
		bytes += len(c.waiting[n].j.payload)
		c.waiting[n].sent = true
		n++
	}
	taken := append([]*combinedJob(nil), c.waiting[:n]...)
	c.waiting = append(c.waiting[:0], c.waiting[n:]...)
	c.mu.Unlock()
	go func() {
		c.write(taken)
		c.release()
	}()
}

// write writes taken in one statement, or each alone when that statement
// wrote nothing (batchRefused), and tells each its result.
func (c *enqueueCombiner) write(taken []*combinedJob) {
	var ids []int64
	var err error
	if len(taken) > 1 {
		jobs := make([]*newJob, len(taken))
		for i, w := range taken {
			jobs[i] = w.j
		}
		ctx, cancel := context.WithTimeout(context.WithoutCancel(taken[0].ctx), dbCallTimeout)
		ids, err = c.batch(ctx, jobs, c.now())
		cancel()
	}
	for i, w := range taken {
		switch {
		case len(taken) > 1 && err == nil:
			w.id = ids[i]
		case len(taken) > 1 && !batchRefused(err):
			w.err = err // it may have committed: not written again
		default:
			ctx, cancel := context.WithTimeout(context.WithoutCancel(w.ctx), dbCallTimeout)
			w.id, w.err = c.single(ctx, w.j)
			cancel()
		}
		close(w.done)
	}
}
