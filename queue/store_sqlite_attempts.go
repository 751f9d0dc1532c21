package queue

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jobqueue/jobqueue/db/sqlitegen"
	"github.com/jobqueue/jobqueue/internal/engine"
)

// The SQLite statements of attempts: the claim that starts them, their
// heartbeats and completions, and the writes of the ends that the outcome
// rule decided (outcome.go), each fenced by the attempts' claim tokens and
// retried while the database is busy (busyRetry, store_sqlite.go); those on
// the pool pass the queue's write gate first (writeGated).

func (s sqliteStore) claim(ctx context.Context, types []string, max int, token string, now, leaseUntil time.Time, after claimPos) ([]*JobRow, error) {
	one, many := claimFilter(types)
	arg := sqlitegen.ClaimJobsParams{
		Token: nullString(token), LeaseUntil: nullTime(&leaseUntil), Type: one, Types: many, Now: now,
		AfterAt: after.at, AfterID: after.id, MaxJobs: int64(max),
	}
	rows, err := writeGated(ctx, s, func() ([]sqlitegen.ClaimJobsRow, error) { return s.qs().ClaimJobs(ctx, arg) })
	if err != nil {
		return nil, err
	}
	// The claim wrote lease_until as engine.SQLite.TimeArg(leaseUntil):
	// to the microsecond, in UTC.
	lease := leaseUntil.UTC().Truncate(time.Microsecond)
	out := make([]*JobRow, len(rows))
	for i, r := range rows {
		scheduled, err := parseSQLiteTime(r.ScheduledAt)
		if err != nil {
			return nil, fmt.Errorf("reading scheduled_at of claimed job %d: %w", r.ID, err)
		}
		created, err := parseSQLiteTime(r.CreatedAt)
		if err != nil {
			return nil, fmt.Errorf("reading created_at of claimed job %d: %w", r.ID, err)
		}
		l := lease
		out[i] = &JobRow{
			ID: r.ID, Name: r.Name, Type: r.Type, Payload: []byte(r.Payload), Status: StatusInProgress,
			Attempts: int(r.Attempts), ClaimToken: r.ClaimToken.String, LeaseUntil: &l,
			MaxAttempts: int(r.MaxAttempts), BaseDelay: time.Duration(r.BaseDelay) * time.Second,
			MaxDelay: time.Duration(r.MaxDelay) * time.Second, Error: r.Error.String,
			ScheduledAt: scheduled, ExpiresAt: timePtr(r.ExpiresAt), FinishedAt: timePtr(r.FinishedAt), CreatedAt: created,
		}
	}
	return out, nil
}

// sqliteTimeLayouts are the layouts the SQLite driver reads a DATETIME
// column's text in (modernc.org/sqlite's parseTimeFormats, a trailing Z
// cut first, then its t.String() form), for a time that the queue did not
// write in its own layout (engine.SQLiteTimeFormat).
var sqliteTimeLayouts = []string{
	"2006-01-02 15:04:05.999999999-07:00",
	"2006-01-02T15:04:05.999999999-07:00",
	"2006-01-02 15:04:05.999999999",
	"2006-01-02T15:04:05.999999999",
	"2006-01-02 15:04",
	"2006-01-02T15:04",
	"2006-01-02",
	"2006-01-02 15:04:05.999999999 -0700 MST",
}

// parseSQLiteTime reads a DATETIME column's text as the driver would read
// it into a time.Time, and returns it as the UTC wall clock it holds
// (engine.AsUTC). The queue's own layout, "2006-01-02 15:04:05.000000", is
// read digit by digit; any other goes through time.Parse.
func parseSQLiteTime(s string) (time.Time, error) {
	if t, ok := parseQueueTime(s); ok {
		return t, nil
	}
	ts := strings.TrimSuffix(s, "Z")
	for _, layout := range sqliteTimeLayouts {
		if t, err := time.Parse(layout, ts); err == nil {
			return engine.AsUTC(t), nil
		}
	}
	return time.Time{}, fmt.Errorf("%q is not a time SQLite's driver reads; was the row written by hand? Write UTC times as %s", s, engine.SQLiteTimeFormat)
}

// parseQueueTime reads s in engine.SQLiteTimeFormat, "2006-01-02
// 15:04:05.000000", as a UTC time; ok is false for any other text,
// a field out of its range included.
func parseQueueTime(s string) (t time.Time, ok bool) {
	if len(s) != len(engine.SQLiteTimeFormat) || s[4] != '-' || s[7] != '-' || s[10] != ' ' ||
		s[13] != ':' || s[16] != ':' || s[19] != '.' {
		return time.Time{}, false
	}
	num := func(from, to int) int {
		n := 0
		for i := from; i < to; i++ {
			c := s[i]
			if c < '0' || c > '9' {
				return -1
			}
			n = n*10 + int(c-'0')
		}
		return n
	}
	y, mo, d, h, mi, sec, us := num(0, 4), num(5, 7), num(8, 10), num(11, 13), num(14, 16), num(17, 19), num(20, 26)
	if y < 0 || mo < 1 || mo > 12 || d < 1 || h < 0 || h > 23 || mi < 0 || mi > 59 || sec < 0 || sec > 59 || us < 0 {
		return time.Time{}, false
	}
	t = time.Date(y, time.Month(mo), d, h, mi, sec, us*1000, time.UTC)
	if t.Day() != d { // the 31st of a 30-day month, say
		return time.Time{}, false
	}
	return t, true
}

func (s sqliteStore) extend(ctx context.Context, refs []attemptRef, leaseUntil time.Time) (map[int64]bool, error) {
	ids, toks := refLists(refs)
	held, err := writeGated(ctx, s, func() ([]int64, error) {
		return s.qs().ExtendLeases(ctx, sqlitegen.ExtendLeasesParams{LeaseUntil: nullTime(&leaseUntil), Ids: jsonList(ids), Tokens: jsonList(toks)})
	})
	return idSet(held), err
}

// extendSkipLocked is extend: SQLite locks no rows, only the database.
func (s sqliteStore) extendSkipLocked(ctx context.Context, refs []attemptRef, leaseUntil time.Time) (map[int64]bool, error) {
	return s.extend(ctx, refs, leaseUntil)
}

func (s sqliteStore) complete(ctx context.Context, refs []attemptRef, now time.Time, del, _ bool) (map[int64]bool, error) {
	ids, toks := refLists(refs)
	held, err := writeGated(ctx, s, func() ([]int64, error) {
		if del {
			return s.qs().DeleteCompletedJobs(ctx, sqlitegen.DeleteCompletedJobsParams{Ids: jsonList(ids), Tokens: jsonList(toks)})
		}
		return s.qs().CompleteJobs(ctx, sqlitegen.CompleteJobsParams{Now: nullTime(&now), Ids: jsonList(ids), Tokens: jsonList(toks)})
	})
	return idSet(held), err
}

func (s sqliteStore) heldAttempts(ctx context.Context, refs []attemptRef) ([]*JobRow, error) {
	ids, toks := refLists(refs)
	rows, err := busyRetry(ctx, func() ([]sqlitegen.Job, error) {
		return s.qs().SelectHeldAttempts(ctx, sqlitegen.SelectHeldAttemptsParams{Ids: jsonList(ids), Tokens: jsonList(toks)})
	})
	return jobRows(rows), err
}

func (s sqliteStore) abandoned(ctx context.Context, d dbtx, now time.Time, limit int) ([]*JobRow, error) {
	rows, err := busyRetryOn(ctx, d, func() ([]sqlitegen.Job, error) {
		return sqlitegen.New(d).SelectAbandoned(ctx, sqlitegen.SelectAbandonedParams{Now: nullTime(&now), MaxRows: int64(limit)})
	})
	return jobRows(rows), err
}

func (s sqliteStore) endAttempts(ctx context.Context, refs []attemptRef, e attemptEnd) (map[int64]bool, error) {
	ids, toks := refLists(refs)
	held, err := writeGated(ctx, s, func() ([]int64, error) {
		return s.qs().EndAttempts(ctx, sqlitegen.EndAttemptsParams{
			Status: string(e.status), Error: nullString(e.errText),
			RetryAt: nullTime(nullableTime(e.retryAt)), FinishedAt: nullTime(nullableTime(e.finishedAt)),
			Ids: jsonList(ids), Tokens: jsonList(toks),
		})
	})
	return idSet(held), err
}

func (s sqliteStore) unclaim(ctx context.Context, refs []attemptRef) (map[int64]bool, error) {
	ids, toks := refLists(refs)
	held, err := writeGated(ctx, s, func() ([]int64, error) {
		return s.qs().UnclaimJobs(ctx, sqlitegen.UnclaimJobsParams{Ids: jsonList(ids), Tokens: jsonList(toks)})
	})
	return idSet(held), err
}

func (s sqliteStore) endAbandoned(ctx context.Context, d dbtx, refs []attemptRef, e attemptEnd, now time.Time) (int64, error) {
	ids, toks := refLists(refs)
	return busyRetryOn(ctx, d, func() (int64, error) {
		return sqlitegen.New(d).EndAbandonedAttempts(ctx, sqlitegen.EndAbandonedAttemptsParams{
			Status: string(e.status), Error: nullString(e.errText),
			RetryAt: nullTime(nullableTime(e.retryAt)), FinishedAt: nullTime(nullableTime(e.finishedAt)),
			Ids: jsonList(ids), Tokens: jsonList(toks), Untokened: untokened(refs), Now: nullTime(&now),
		})
	})
}

func (s sqliteStore) fail(ctx context.Context, ref attemptRef, e attemptEnd) (bool, error) {
	n, err := writeGated(ctx, s, func() (int64, error) {
		return s.qs().FailJob(ctx, sqlitegen.FailJobParams{
			Status: string(e.status), Error: nullString(e.errText),
			RetryAt: nullTime(nullableTime(e.retryAt)), FinishedAt: nullTime(nullableTime(e.finishedAt)),
			ID: ref.ID, Token: nullString(ref.Token),
		})
	})
	return n == 1, err
}
