package queue

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

// Stats counts the jobs per status, of one type or (typ "") of all; every
// status is a key, with 0 when there are none.
func (q *Queue) Stats(ctx context.Context, typ string) (map[Status]int64, error) {
	if noJobHas(typ, maxTypeLen) {
		return everyStatus(nil), nil
	}
	got, err := q.st.stats(ctx, typ)
	if err != nil {
		return nil, fmt.Errorf("jobqueue: stats: %w", err)
	}
	return everyStatus(got), nil
}

// everyStatus is the counts of got with every status as a key: 0 for the
// statuses got lacks (got may be nil).
func everyStatus(got map[Status]int64) map[Status]int64 {
	out := make(map[Status]int64, len(Statuses()))
	for _, s := range Statuses() {
		out[s] = got[s]
	}
	return out
}

// List's page size: DefaultListLimit when ListFilter.Limit is 0, at most
// MaxListLimit.
const (
	DefaultListLimit = 100
	MaxListLimit     = 100000
)

// List returns one page of the jobs matching f, newest (highest id) first:
// at most f.Limit jobs (DefaultListLimit when 0), and only those with ids
// below f.AfterID when it is set. To page through every match, pass the
// last id of a page as the next call's AfterID, until a page is shorter
// than the limit; each job then comes once, even while jobs are enqueued
// (newer jobs appear only on a new first page). Every page is one range
// scan of the primary key, however deep.
//
// An unknown status, a negative AfterID, or a Limit below 0 or above
// MaxListLimit is an error wrapping ErrInvalidFilter, and nothing is read.
func (q *Queue) List(ctx context.Context, f ListFilter) ([]*JobRow, error) {
	beforeID, limit, err := listBounds(f)
	if err != nil {
		return nil, err
	}
	if noJobHas(f.Type, maxTypeLen) || noJobHas(f.Name, maxKindLen) {
		return []*JobRow{}, nil
	}
	rows, err := q.st.list(ctx, f, beforeID, limit)
	if err != nil {
		return nil, fmt.Errorf("jobqueue: list: %w", err)
	}
	return rows, nil
}

// listBounds checks f as List documents and returns the id its page
// starts below (math.MaxInt64 for the first) and its limit.
func listBounds(f ListFilter) (beforeID int64, limit int, _ error) {
	if f.Status != "" && !validStatus(f.Status) {
		return 0, 0, fmt.Errorf("%w (%w): unknown status %q; use one of %v", ErrInvalidFilter, ErrInvalidJob, f.Status, Statuses())
	}
	limit = f.Limit
	switch {
	case limit < 0 || limit > MaxListLimit:
		return 0, 0, fmt.Errorf("%w: the limit %d is out of range; use 1 to %d, or 0 for %d", ErrInvalidFilter, limit, MaxListLimit, DefaultListLimit)
	case limit == 0:
		limit = DefaultListLimit
	}
	beforeID = f.AfterID
	switch {
	case beforeID < 0:
		return 0, 0, fmt.Errorf("%w: AfterID %d is negative; use 0 for the first page, then the last id of the previous page", ErrInvalidFilter, beforeID)
	case beforeID == 0:
		beforeID = math.MaxInt64
	}
	return beforeID, limit, nil
}

// DefaultListWindow is the window the dashboard passes to ListPage: the
// most ids one page of a kind without a type examines, so that such a
// page costs about the same on a table of any size. Measured by
// BenchmarkDashboard in package web at a million rows, a window costs
// about 0.13 µs an id on PostgreSQL and 0.4 µs on MariaDB: 20 000 ids
// make a page of about 3 and 15 ms, where reading the whole table for a
// rare kind took 51 and 461 ms (the README has the figures).
const DefaultListWindow = 20000

// ListPage is one page of Queue.ListPage: its jobs and where the next page
// starts.
type ListPage struct {
	// Jobs are the page's jobs, newest first: at most the filter's limit,
	// and fewer, even none, when SearchedFrom is above 0.
	Jobs []*JobRow
	// NextAfterID is the AfterID of the next page, or 0 when no older job
	// can match: the last job's id when the page is full, else
	// SearchedFrom when the window ended the page and older ids remain.
	NextAfterID int64
	// SearchedFrom and SearchedTo, when SearchedFrom is above 0, are the
	// lowest and highest ids of the window the page examined, which ended
	// it before it was full while older ids remain: no other job of those
	// ids matches. Both are 0 otherwise.
	SearchedFrom, SearchedTo int64
}

// ListPage is List with where the next page starts, and a bound on its
// cost: when f selects a kind (Name) without a Type, which no index of the
// table serves, the page examines at most window ids, from the newest id
// below its start (f.AfterID, or none for the first page) down: one range
// scan of the primary key whatever the table's size. Such a page may hold
// fewer jobs than the limit, even none, while older jobs match; its
// NextAfterID then says where to go on. Other filters (a type, a status
// alone, none) are served by an index and page as List does, and so does
// every filter when window is 0.
//
// Errors are List's; a negative window is an error wrapping
// ErrInvalidFilter too, and nothing is read.
func (q *Queue) ListPage(ctx context.Context, f ListFilter, window int64) (ListPage, error) {
	beforeID, limit, err := listBounds(f)
	if err != nil {
		return ListPage{}, err
	}
	if window < 0 {
		return ListPage{}, fmt.Errorf("%w: the window %d is negative; use 0 for none", ErrInvalidFilter, window)
	}
	if noJobHas(f.Type, maxTypeLen) || noJobHas(f.Name, maxKindLen) {
		return ListPage{Jobs: []*JobRow{}}, nil
	}
	p, err := q.listPage(ctx, f, beforeID, limit, window)
	if err != nil {
		return ListPage{}, fmt.Errorf("jobqueue: list: %w", err)
	}
	return p, nil
}

// listPage reads ListPage's page, asking for one job more than the limit
// to know whether the page is the last.
func (q *Queue) listPage(ctx context.Context, f ListFilter, beforeID int64, limit int, window int64) (ListPage, error) {
	var p ListPage
	var err error
	floorID := int64(0)
	if window == 0 || f.Name == "" || f.Type != "" {
		p.Jobs, err = q.st.list(ctx, f, beforeID, limit+1)
	} else {
		// The window starts at the newest id below the page's start, so
		// that an AfterID far above every id, or a gap of pruned ids, is
		// not a run of empty pages.
		var newest int64
		var found bool
		newest, found, err = q.st.idBelow(ctx, beforeID)
		if err != nil || !found {
			return ListPage{Jobs: []*JobRow{}}, err
		}
		beforeID = newest + 1
		floorID = max(beforeID-window, 0)
		p.Jobs, err = q.st.listWindow(ctx, f, floorID, beforeID, limit+1)
	}
	if err != nil {
		return ListPage{}, err
	}
	if len(p.Jobs) > limit {
		p.Jobs = p.Jobs[:limit]
		p.NextAfterID = p.Jobs[limit-1].ID
		return p, nil
	}
	if floorID > 1 {
		_, older, err := q.st.idBelow(ctx, floorID)
		if err != nil {
			return ListPage{}, err
		}
		if older {
			p.NextAfterID, p.SearchedFrom, p.SearchedTo = floorID, floorID, beforeID-1
		}
	}
	return p, nil
}

func validStatus(s Status) bool {
	for _, x := range Statuses() {
		if s == x {
			return true
		}
	}
	return false
}

// Get returns the job with the given id, or an error wrapping
// ErrJobNotFound when there is none (never existed, pruned, or deleted on
// success), or ErrInvalidID, reading nothing, when id is not positive.
func (q *Queue) Get(ctx context.Context, id int64) (*JobRow, error) {
	if err := checkIDs("get", []int64{id}); err != nil {
		return nil, err
	}
	row, err := q.st.get(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("jobqueue: get job %d: %w", id, err)
	}
	if row == nil {
		return nil, q.jobNotFound(id)
	}
	return row, nil
}

// Retry puts a failed or expired job back to pending, due now, with its
// attempts reset to 0 and its error and finished_at cleared. An expired
// job's deadline is cleared too, else it would expire again, and so is a
// failed job's deadline that has passed; a deadline still ahead is kept.
// It returns false, and changes nothing, for a job in any other status or
// a missing id; and an error wrapping ErrDuplicate, changing nothing, for
// a job whose unique key another live job has taken meanwhile (retry it
// once that one has finished), or ErrInvalidID, doing nothing, for an id
// that is not positive.
func (q *Queue) Retry(ctx context.Context, id int64) (bool, error) {
	if err := checkIDs("retry", []int64{id}); err != nil {
		return false, err
	}
	var ok bool
	var err error
	if q.hasUnique(ctx) {
		ok, err = q.retryKeyed(ctx, id, q.now())
		if errors.Is(err, ErrDuplicate) {
			return false, err
		}
	} else {
		ok, err = q.retryPlain(ctx, id, q.now())
	}
	if err != nil {
		return false, fmt.Errorf("jobqueue: retry job %d: %w", id, err)
	}
	if ok {
		q.logger.Info("job retried", "id", id)
		q.wake.notify()
	}
	return ok, nil
}

// ExpireOverdue marks pending jobs whose deadline has passed expired
// (finished_at now) and returns how many. It works in batches of at most
// MaintenanceBatch rows per statement, each its own short transaction, so a
// large backlog never makes one huge transaction. Workers run it
// periodically (the leader only, see WorkerConfig.MaintenanceInterval).
func (q *Queue) ExpireOverdue(ctx context.Context) (int64, error) {
	return q.expireOverdue(ctx, nil)
}

// expireOverdue is ExpireOverdue; with f (the leader's maintenance) each
// batch is an act of the leader fenced by f (leaderAct).
func (q *Queue) expireOverdue(ctx context.Context, f *termFence) (int64, error) {
	now := q.now()
	n, err := q.batches(ctx, "expire", f, func(ctx context.Context, d dbtx, max int) (int64, error) {
		return q.st.expire(ctx, d, now, max)
	})
	if err != nil {
		return n, fmt.Errorf("jobqueue: expire overdue jobs (after expiring %d): %w", n, err)
	}
	if n > 0 {
		q.logger.Info("overdue jobs expired", "count", n)
	} else {
		q.logger.Debug("no overdue jobs")
	}
	return n, nil
}

// reclaimBatch is how many abandoned attempts one Reclaim round reads and
// ends at most.
const reclaimBatch = 500

// Reclaim ends abandoned attempts: in_progress jobs whose lease has run out.
// Each becomes expired if its deadline has passed, failed if it has used
// all its attempts, else pending again at once (the outcome rule,
// decideOutcome); its error says that the lease ran out. It works in
// rounds of at most 500 jobs, each one read and one write per group of
// equal type and outcome, until none is left. It returns how many it ended
// and emits EventReclaimed with that count, and the counts per type and
// outcome, when there were any, also when it then fails (the attempts its
// earlier statements ended stay ended). Workers run it periodically.
func (q *Queue) Reclaim(ctx context.Context) (int64, error) {
	return q.reclaim(ctx, nil)
}

// reclaim is Reclaim; with f (the leader's maintenance) each round is an
// act of the leader fenced by f (leaderAct).
func (q *Queue) reclaim(ctx context.Context, f *termFence) (int64, error) {
	now := q.now()
	counts := map[ReclaimedCount]int64{} // by type and outcome (Count 0)
	var total int64
	for {
		var jobs []*JobRow
		var n int64
		ended := map[ReclaimedCount]int64{}
		err := q.leaderAct(ctx, f, func(d dbtx) error {
			if f != nil {
				// An act run again starts over (it rolled back); without
				// f, what the earlier statements ended stays ended.
				n, ended = 0, map[ReclaimedCount]int64{}
			}
			var err error
			if jobs, err = q.st.abandoned(ctx, d, now, reclaimBatch); err != nil {
				return err
			}
			// The batched statements match "id in the ids and token in the
			// tokens", which is the (id, token) pair only for tokens that
			// name their job (wellFormed). A token of another version 2
			// client of the table (a random one) is ended in a statement
			// of its own, where the two are the same; so is a NULL token
			// (""), which that statement then matches (untokened).
			var held []*JobRow
			var batches [][]*JobRow
			for _, j := range jobs {
				if j.ref().wellFormed() {
					held = append(held, j)
				} else {
					batches = append(batches, []*JobRow{j})
				}
			}
			// One write per type and outcome, so that each is counted
			// by type (Event.Reclaimed).
			for _, rows := range append([][]*JobRow{held}, batches...) {
				for _, rows := range byType(rows) {
					order, groups := groupEnds(rows, endCause{kind: causeReclaimed}, now)
					for _, e := range order {
						m, err := q.st.endAbandoned(ctx, d, groups[e], e, now)
						n += m
						ended[ReclaimedCount{Type: rows[0].Type, Outcome: e.outcome}] += m
						if err != nil {
							return err
						}
					}
				}
			}
			return nil
		})
		if err != nil {
			if f != nil {
				n, ended = 0, nil // the act rolled back
			}
			// The attempts ended so far stay ended (committed): report
			// them, so that they are counted (EventReclaimed).
			for k, m := range ended {
				counts[k] += m
			}
			total += n
			q.reportReclaimed(counts, total)
			return total, fmt.Errorf("jobqueue: reclaim abandoned attempts (after %d): %w", total, err)
		}
		for k, m := range ended {
			counts[k] += m
		}
		total += n
		if q.onBatch != nil {
			q.onBatch("reclaim", n)
		}
		// A short round was the last; a round that ended nothing (another
		// reclaimer was first, or rows no attempt can hold) would repeat.
		if len(jobs) < reclaimBatch || n == 0 {
			break
		}
	}
	if total == 0 {
		q.logger.Debug("no abandoned attempts")
	}
	q.reportReclaimed(counts, total)
	return total, nil
}

// reportReclaimed logs the total abandoned attempts one Reclaim ended and
// emits EventReclaimed with them, by type and outcome (counts), when there
// were any, whether or not that Reclaim then failed: they are ended.
func (q *Queue) reportReclaimed(counts map[ReclaimedCount]int64, total int64) {
	if total == 0 {
		return
	}
	var reclaimed []ReclaimedCount
	byOutcome := map[Outcome]int64{}
	for k, m := range counts {
		if m > 0 {
			byOutcome[k.Outcome] += m
			reclaimed = append(reclaimed, ReclaimedCount{Type: k.Type, Outcome: k.Outcome, Count: m})
		}
	}
	slices.SortFunc(reclaimed, func(a, b ReclaimedCount) int {
		return cmp.Or(strings.Compare(a.Type, b.Type), strings.Compare(string(a.Outcome), string(b.Outcome)))
	})
	q.logger.Warn("abandoned attempts reclaimed", "count", total,
		"retried", byOutcome[OutcomeRetried], "failed", byOutcome[OutcomeFailed], "expired", byOutcome[OutcomeExpired])
	q.emit(Event{Kind: EventReclaimed, Count: total, Reclaimed: reclaimed})
	q.wake.notify()
}

// byType splits rows by type, in the order each type first appears.
func byType(rows []*JobRow) [][]*JobRow {
	var out [][]*JobRow
	at := map[string]int{}
	for _, r := range rows {
		i, ok := at[r.Type]
		if !ok {
			i = len(out)
			at[r.Type] = i
			out = append(out, nil)
		}
		out[i] = append(out[i], r)
	}
	return out
}

// MaintenanceBatch is the most rows one statement of ExpireOverdue or Prune
// changes; they repeat such statements, each its own transaction, until a
// batch comes back short.
const MaintenanceBatch = 1000

// batches runs one bounded statement of op (at most q.batchSize rows) again
// and again until one changes fewer rows than that or fails, and returns
// the rows changed in all. Each statement is its own transaction: with f,
// an act of the leader fenced by f (leaderAct), whose error (such as
// errTermEnded) stops the loop.
func (q *Queue) batches(ctx context.Context, op string, f *termFence, stmt func(ctx context.Context, d dbtx, max int) (int64, error)) (int64, error) {
	size := q.batchSize
	if size <= 0 {
		size = MaintenanceBatch
	}
	var total int64
	for {
		var n int64
		err := q.leaderAct(ctx, f, func(d dbtx) error {
			var err error
			n, err = stmt(ctx, d, size)
			return err
		})
		if err != nil {
			return total, err
		}
		if q.onBatch != nil {
			q.onBatch(op, n)
		}
		total += n
		if n < int64(size) {
			return total, nil
		}
		if err := ctx.Err(); err != nil {
			return total, err
		}
	}
}

// Prune deletes completed, failed and expired jobs that finished more than
// olderThan ago, in batches of at most MaintenanceBatch rows per statement
// (each its own transaction), and returns how many it deleted. It also
// deletes the unique-key rows of jobs that are gone among one window of at
// most MaintenanceBatch key rows, the next after the previous Prune's of q
// (pruneKeys), so that a pass never reads the whole key table.
func (q *Queue) Prune(ctx context.Context, olderThan time.Duration) (int64, error) {
	return q.prune(ctx, olderThan, nil)
}

// prune is Prune; f is as for expireOverdue.
func (q *Queue) prune(ctx context.Context, olderThan time.Duration, f *termFence) (int64, error) {
	if olderThan < 0 {
		return 0, fmt.Errorf("jobqueue: prune: the age %v is negative", olderThan)
	}
	cutoff := q.now().Add(-olderThan)
	total, err := q.batches(ctx, "prune", f, func(ctx context.Context, d dbtx, max int) (int64, error) {
		return q.st.prune(ctx, d, cutoff, max)
	})
	if err != nil {
		return total, fmt.Errorf("jobqueue: prune (after deleting %d): %w", total, err)
	}
	if total > 0 {
		q.logger.Info("finished jobs pruned", "count", total, "older_than", olderThan)
	}
	// The unique keys of pruned jobs (and of jobs deleted on success) are
	// free already; delete their rows.
	if _, err := q.pruneKeys(ctx, f); err != nil {
		return total, fmt.Errorf("jobqueue: prune: deleting the unique keys of deleted jobs (after deleting %d jobs): %w", total, err)
	}
	return total, nil
}

// Purge deletes every job of the table, whatever its status, running ones
// included, and returns how many. It is destructive: meant for benchmarks,
// demos and tests that start from an empty table.
func (q *Queue) Purge(ctx context.Context) (int64, error) {
	n, err := q.st.purge(ctx)
	if err != nil {
		return 0, fmt.Errorf("jobqueue: purge: %w", err)
	}
	q.logger.Warn("all jobs purged", "count", n)
	if _, err := q.pruneKeys(ctx, nil); err != nil {
		return n, fmt.Errorf("jobqueue: purge: deleting the unique keys: %w", err)
	}
	return n, nil
}
