package queue

import (
	"context"
	"math"
	"time"

	"github.com/jobqueue/jobqueue/db/mysqlgen"
	"github.com/jobqueue/jobqueue/db/pggen"
	"github.com/jobqueue/jobqueue/db/sqlitegen"
)

// The three engines' adapters for the overview reads (overview.go).
var (
	_ overviewStore = pgStore{}
	_ overviewStore = mysqlStore{}
	_ overviewStore = sqliteStore{}
)

// statusCounts builds a count map from the five counts in Statuses() order.
func statusCounts(pending, inProgress, completed, failed, expired int64) map[Status]int64 {
	return map[Status]int64{
		StatusPending: pending, StatusInProgress: inProgress, StatusCompleted: completed,
		StatusFailed: failed, StatusExpired: expired,
	}
}

// limit32 caps a row limit to the int32 the generated queries take.
func limit32(n int64) int32 {
	if n > math.MaxInt32 {
		return math.MaxInt32
	}
	return int32(n)
}

func (s pgStore) firstType(ctx context.Context) (string, bool, error) {
	return firstOf(s.qs().FirstType(ctx))
}

func (s pgStore) nextType(ctx context.Context, after string) (string, bool, error) {
	return firstOf(s.qs().NextType(ctx, after))
}

func (s pgStore) countUpTo(ctx context.Context, typ string, limit int64) (map[Status]int64, error) {
	if typ == "" {
		r, err := s.qs().CountStatusesUpTo(ctx, limit32(limit))
		return statusCounts(r.Pending, r.InProgress, r.Completed, r.Failed, r.Expired), err
	}
	r, err := s.qs().CountStatusesOfTypeUpTo(ctx, pggen.CountStatusesOfTypeUpToParams{Type: typ, MaxRows: limit32(limit)})
	return statusCounts(r.Pending, r.InProgress, r.Completed, r.Failed, r.Expired), err
}

func (s pgStore) oldestDue(ctx context.Context, typ string, now time.Time) (*JobRow, error) {
	var rows []pggen.Job
	var err error
	if typ == "" {
		rows, err = s.qs().OldestDuePending(ctx, now)
	} else {
		rows, err = s.qs().OldestDuePendingOfType(ctx, pggen.OldestDuePendingOfTypeParams{Type: typ, Now: now})
	}
	if err != nil || len(rows) == 0 {
		return nil, err
	}
	return jobRow(rows[0]), nil
}

func (s pgStore) recentFailures(ctx context.Context, limit int) ([]*JobRow, error) {
	rows, err := s.qs().RecentFailures(ctx, int32(limit))
	return jobRows(rows), err
}

func (s mysqlStore) firstType(ctx context.Context) (string, bool, error) {
	return firstOf(s.qs().FirstType(ctx))
}

func (s mysqlStore) nextType(ctx context.Context, after string) (string, bool, error) {
	return firstOf(s.qs().NextType(ctx, after))
}

func (s mysqlStore) countUpTo(ctx context.Context, typ string, limit int64) (map[Status]int64, error) {
	n := limit32(limit)
	if typ == "" {
		r, err := s.qs().CountStatusesUpTo(ctx, mysqlgen.CountStatusesUpToParams{Limit: n, Limit_2: n, Limit_3: n, Limit_4: n, Limit_5: n})
		return statusCounts(r.Pending, r.InProgress, r.Completed, r.Failed, r.Expired), err
	}
	r, err := s.qs().CountStatusesOfTypeUpTo(ctx, mysqlgen.CountStatusesOfTypeUpToParams{
		Type: typ, Limit: n, Type_2: typ, Limit_2: n, Type_3: typ, Limit_3: n,
		Type_4: typ, Limit_4: n, Type_5: typ, Limit_5: n,
	})
	return statusCounts(r.Pending, r.InProgress, r.Completed, r.Failed, r.Expired), err
}

func (s mysqlStore) oldestDue(ctx context.Context, typ string, now time.Time) (*JobRow, error) {
	var rows []mysqlgen.Job
	var err error
	if typ == "" {
		rows, err = s.qs().OldestDuePending(ctx, now)
	} else {
		rows, err = s.qs().OldestDuePendingOfType(ctx, mysqlgen.OldestDuePendingOfTypeParams{Type: typ, ScheduledAt: now})
	}
	if err != nil || len(rows) == 0 {
		return nil, err
	}
	return jobRow(rows[0]), nil
}

func (s mysqlStore) recentFailures(ctx context.Context, limit int) ([]*JobRow, error) {
	rows, err := s.qs().RecentFailures(ctx, int32(limit))
	return jobRows(rows), err
}

func (s sqliteStore) firstType(ctx context.Context) (string, bool, error) {
	return firstOf(s.qs().FirstType(ctx))
}

func (s sqliteStore) nextType(ctx context.Context, after string) (string, bool, error) {
	return firstOf(s.qs().NextType(ctx, after))
}

func (s sqliteStore) countUpTo(ctx context.Context, typ string, limit int64) (map[Status]int64, error) {
	if typ == "" {
		r, err := s.qs().CountStatusesUpTo(ctx, limit)
		return statusCounts(r.Pending, r.InProgress, r.Completed, r.Failed, r.Expired), err
	}
	r, err := s.qs().CountStatusesOfTypeUpTo(ctx, sqlitegen.CountStatusesOfTypeUpToParams{Type: typ, MaxRows: limit})
	return statusCounts(r.Pending, r.InProgress, r.Completed, r.Failed, r.Expired), err
}

func (s sqliteStore) oldestDue(ctx context.Context, typ string, now time.Time) (*JobRow, error) {
	var rows []sqlitegen.Job
	var err error
	if typ == "" {
		rows, err = s.qs().OldestDuePending(ctx, now)
	} else {
		rows, err = s.qs().OldestDuePendingOfType(ctx, sqlitegen.OldestDuePendingOfTypeParams{Type: typ, Now: now})
	}
	if err != nil || len(rows) == 0 {
		return nil, err
	}
	return jobRow(rows[0]), nil
}

func (s sqliteStore) recentFailures(ctx context.Context, limit int) ([]*JobRow, error) {
	rows, err := s.qs().RecentFailures(ctx, int64(limit))
	return jobRows(rows), err
}
