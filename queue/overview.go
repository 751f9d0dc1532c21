package queue

import (
	"context"
	"fmt"
	"time"
)

// The reads behind a dashboard's overview. Each one reads one of the
// table's indexes and stops early, so that it answers quickly on a table of
// millions of rows: no count of the whole table, no OFFSET.

// overviewStore is what each engine's adapter gives the overview reads
// (overview_store.go).
type overviewStore interface {
	// firstType is the smallest type, ok false when the table is empty;
	// nextType the smallest one after after.
	firstType(ctx context.Context) (string, bool, error)
	nextType(ctx context.Context, after string) (string, bool, error)
	// countUpTo counts the jobs per status (of one type, or all when typ
	// is ""), each count stopping at limit.
	countUpTo(ctx context.Context, typ string, limit int64) (map[Status]int64, error)
	// oldestDue is the pending job due longest ago (of one type, or all when
	// typ is ""), nil when none is due.
	oldestDue(ctx context.Context, typ string, now time.Time) (*JobRow, error)
	// recentFailures lists failed jobs, the last scheduled first.
	recentFailures(ctx context.Context, limit int) ([]*JobRow, error)
}

func (q *Queue) overviewStore() overviewStore { return q.st.(overviewStore) }

// Types returns the distinct job types in the table, in byte order, at most
// max of them (max <= 0 means 100), and whether there are more. Each type
// costs one index probe, so it stays quick however many jobs there are.
func (q *Queue) Types(ctx context.Context, max int) ([]string, bool, error) {
	if max <= 0 {
		max = 100
	}
	st := q.overviewStore()
	t, ok, err := st.firstType(ctx)
	var out []string
	for err == nil && ok {
		if len(out) == max {
			return out, true, nil
		}
		out = append(out, t)
		t, ok, err = st.nextType(ctx, t)
	}
	if err != nil {
		return nil, false, fmt.Errorf("jobqueue: list types: %w", err)
	}
	return out, false, nil
}

// StatsUpTo is Stats with every count stopping at limit: a count equal to
// limit means "limit or more". It reads at most limit index entries per
// status, where Stats reads them all; use it where a million-row table must
// answer quickly (a dashboard). A limit below 1 is an error.
func (q *Queue) StatsUpTo(ctx context.Context, typ string, limit int64) (map[Status]int64, error) {
	if limit < 1 {
		return nil, fmt.Errorf("jobqueue: stats: the limit %d must be at least 1", limit)
	}
	if noJobHas(typ, maxTypeLen) {
		return everyStatus(nil), nil
	}
	got, err := q.overviewStore().countUpTo(ctx, typ, limit)
	if err != nil {
		return nil, fmt.Errorf("jobqueue: stats: %w", err)
	}
	return everyStatus(got), nil
}

// OldestDue returns the pending job of the given type (all types when typ
// is "") that has been due for the longest time, or nil when no pending
// job is due. Its age, now minus its ScheduledAt, tells how far the workers
// are behind.
func (q *Queue) OldestDue(ctx context.Context, typ string) (*JobRow, error) {
	if noJobHas(typ, maxTypeLen) {
		return nil, nil
	}
	row, err := q.overviewStore().oldestDue(ctx, typ, q.now())
	if err != nil {
		return nil, fmt.Errorf("jobqueue: oldest due job: %w", err)
	}
	return row, nil
}

// RecentFailures returns up to limit failed jobs (limit <= 0 means 10, at
// most 1000), the one whose last attempt was due latest first.
func (q *Queue) RecentFailures(ctx context.Context, limit int) ([]*JobRow, error) {
	switch {
	case limit <= 0:
		limit = 10
	case limit > 1000:
		limit = 1000
	}
	rows, err := q.overviewStore().recentFailures(ctx, limit)
	if err != nil {
		return nil, fmt.Errorf("jobqueue: recent failures: %w", err)
	}
	return rows, nil
}
