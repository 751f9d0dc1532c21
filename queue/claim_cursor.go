package queue

import (
	"context"
	"time"
)

// The claimer's watermark. A claim reads the pending jobs in (scheduled_at,
// id) order and takes the first due ones. On PostgreSQL every claimed job
// leaves a dead entry at the head of that range of the index, which vacuum
// removes only once no transaction could still see the old row: while one
// is held open (idle in transaction, a long report), every claim that
// starts from the beginning reads all the entries of the jobs claimed
// since, and a drain slows as it goes. So the claimer remembers where its
// last claim ended (the (scheduled_at, id) of the last job it claimed) and
// starts the next claim after it.
//
// A job can become due behind the watermark: a retry whose backoff ended
// early, a released or reclaimed job (they keep their scheduled_at), an
// At() in the past, an enqueue with an earlier scheduled_at that committed
// late, or a job another claimer skipped while it was locked and then
// left. None is lost: the claimer scans from the start again at once when
// a claim past the watermark finds nothing, and at least every
// claimRescanEvery in any case. A job behind the watermark therefore waits
// at most claimRescanEvery plus one claim (or the poll interval, when the
// worker is idle, as any job does).

// claimRescanEvery is the longest a claimer claims past its watermark
// before it scans from the start again (see claimCursor).
const claimRescanEvery = time.Second

// claimPos is a place in the claim order (scheduled_at, id): a claim starts
// after it. The zero claimPos (the year 1, id 0) lies before every job the
// table can hold (checkYear refuses earlier times; ids start at 1).
type claimPos struct {
	at time.Time
	id int64
}

// after reports whether p comes after o in the claim order.
func (p claimPos) after(o claimPos) bool {
	return p.at.After(o.at) || (p.at.Equal(o.at) && p.id > o.id)
}

// claimCursor claims jobs for one claimer past its watermark, scanning from
// the start when due (see above), on the claimer's own claim session where
// the store has one (claimSessions).
type claimCursor struct {
	q     *Queue
	types []string
	lease time.Duration

	pos       claimPos  // after the last job claimed; valid when set
	set       bool      // the last claim statement found jobs
	rescanDue time.Time // the next claim scans from the start from then on

	sess      claimSession // nil: claims run on the pool
	sessSince time.Time

	// giveBacks is the context of the give-backs of its claims that may
	// have committed (claimUnsure; claimAfterOn): a worker's, which ends
	// with its run (claim_late.go); nil: the claim's context without its
	// end.
	giveBacks context.Context
}

// claim claims up to n jobs: past the watermark, or from the start when no
// watermark is set, a rescan is due, or nothing is due past it.
func (c *claimCursor) claim(ctx context.Context, n int) ([]*JobRow, error) {
	on, err := c.store(ctx)
	if err != nil {
		return nil, err
	}
	giveBacks := c.giveBacks
	if giveBacks == nil {
		giveBacks = context.WithoutCancel(ctx)
	}
	now := c.q.now()
	after, fromStart := c.plan(now)
	rows, err := c.q.claimAfterOn(ctx, giveBacks, on, c.types, n, c.lease, after)
	if err == nil && !fromStart && len(rows) == 0 {
		// Nothing due past the watermark: look behind it at once.
		fromStart = true
		rows, err = c.q.claimAfterOn(ctx, giveBacks, on, c.types, n, c.lease, claimPos{})
	}
	if err != nil {
		c.set = false
		c.closeSession()
		return nil, err
	}
	c.advance(rows, fromStart, now)
	return rows, nil
}

// plan is where a claim that starts at now starts: after the watermark, or
// from the start (the zero claimPos, fromStart) when no watermark is set or
// a rescan is due. A rescan is due too when now is before the last one
// (the wall clock was stepped back): else none came until the clock had
// caught up again, as long as the step.
func (c *claimCursor) plan(now time.Time) (after claimPos, fromStart bool) {
	if !c.set || !now.Before(c.rescanDue) || now.Before(c.rescanDue.Add(-claimRescanEvery)) {
		return claimPos{}, true
	}
	return c.pos, false
}

// advance records a claim that started at now (from the start, or not) and
// claimed rows, in claim order.
func (c *claimCursor) advance(rows []*JobRow, fromStart bool, now time.Time) {
	if fromStart {
		c.rescanDue = now.Add(claimRescanEvery)
	}
	// The claim read every due job up to its last one (rows are in claim
	// order). When it found none (nothing is due, behind the watermark or
	// past it), the watermark stays: an idle worker's next claim, for the
	// job whose enqueue woke it, then starts past the dead entries of the
	// jobs it claimed before instead of reading them all (on PostgreSQL,
	// some hundred index entries per thousand jobs claimed since the last
	// vacuum, which made the claim of a lone job slower than its insert).
	if len(rows) > 0 {
		last := rows[len(rows)-1]
		c.set, c.pos = true, claimPos{at: last.ScheduledAt, id: last.ID}
	}
}

// claimSessionMaxAge is how long a claimer keeps one claim session before
// it gives the connection back and takes another, so that the pool's
// lifetime settings and the server's idle timeouts still see it turn over.
const claimSessionMaxAge = time.Minute

// store is where the next claim runs: the claimer's claim session where
// the store has them (opened on first use, renewed after
// claimSessionMaxAge), else the queue's store.
func (c *claimCursor) store(ctx context.Context) (claimStore, error) {
	cs, ok := c.q.st.(claimSessions)
	if !ok {
		return c.q.st, nil
	}
	if c.sess != nil && time.Since(c.sessSince) >= claimSessionMaxAge {
		c.closeSession()
	}
	if c.sess == nil {
		s, err := cs.claimSession(ctx)
		if err != nil {
			return nil, err
		}
		if s == nil {
			return c.q.st, nil
		}
		c.sess, c.sessSince = s, time.Now()
	}
	return c.sess, nil
}

// closeSession gives up the claim session, if any.
func (c *claimCursor) closeSession() {
	if c.sess != nil {
		c.sess.close()
		c.sess = nil
	}
}

// claimStore runs claims: the queue's store, or a claim session.
type claimStore interface {
	// claim is store.claim.
	claim(ctx context.Context, types []string, max int, token string, now, leaseUntil time.Time, after claimPos) ([]*JobRow, error)
}

// claimSessions is a store whose claims save round trips on a connection
// held for one claimer (MySQL: its session's isolation level is set to READ
// COMMITTED once, instead of before every claim's transaction).
type claimSessions interface {
	// claimSession opens a claim session, or returns nil, nil when the
	// pool is too small to hold a connection for claims.
	claimSession(ctx context.Context) (claimSession, error)
}

// claimSession is one claimer's claim connection.
type claimSession interface {
	claimStore
	// close gives the connection up (its session changed: it is closed,
	// not returned to the pool as it is).
	close()
}
