package queue

import (
	"context"
	"time"

	"github.com/jobqueue/jobqueue/db/sqlitegen"
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
	rows, err := writeGated(ctx, s, func() ([]sqlitegen.Job, error) { return s.qs().ClaimJobs(ctx, arg) })
	if err != nil {
		return nil, err
	}
	return sqliteRows(rows), nil
}

func (s sqliteStore) extend(ctx context.Context, refs []attemptRef, leaseUntil time.Time) (map[int64]bool, error) {
	ids, toks := refLists(refs)
	held, err := writeGated(ctx, s, func() ([]int64, error) {
		return s.qs().ExtendLeases(ctx, sqlitegen.ExtendLeasesParams{LeaseUntil: nullTime(&leaseUntil), Ids: jsonList(ids), Tokens: jsonList(toks)})
	})
	return idSet(held), err
}

func (s sqliteStore) complete(ctx context.Context, refs []attemptRef, now time.Time, del bool) (map[int64]bool, error) {
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
	return sqliteRows(rows), err
}

func (s sqliteStore) abandoned(ctx context.Context, d dbtx, now time.Time, limit int) ([]*JobRow, error) {
	rows, err := busyRetryOn(ctx, d, func() ([]sqlitegen.Job, error) {
		return sqlitegen.New(d).SelectAbandoned(ctx, sqlitegen.SelectAbandonedParams{Now: nullTime(&now), MaxRows: int64(limit)})
	})
	return sqliteRows(rows), err
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

func (s sqliteStore) endAbandoned(ctx context.Context, d dbtx, refs []attemptRef, e attemptEnd, now time.Time) (int64, error) {
	ids, toks := refLists(refs)
	return busyRetryOn(ctx, d, func() (int64, error) {
		return sqlitegen.New(d).EndAbandonedAttempts(ctx, sqlitegen.EndAbandonedAttemptsParams{
			Status: string(e.status), Error: nullString(e.errText),
			RetryAt: nullTime(nullableTime(e.retryAt)), FinishedAt: nullTime(nullableTime(e.finishedAt)),
			Ids: jsonList(ids), Tokens: jsonList(toks), Now: nullTime(&now),
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
