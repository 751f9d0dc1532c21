package queue

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/testdb"
)

// TestClaimRowsMatchGet: on every engine, the rows a claim returns are the
// jobs as Get reads them back after the claim, for every column NULL and
// set, on a claim session (a worker's claims) and on the pool. PostgreSQL's
// and MySQL's claims scan their rows themselves (scanClaimed,
// scanMySQLClaimed), so their column order and conversions are checked
// here against the generated queries' own.
func TestClaimRowsMatchGet(t *testing.T) {
	forEachEngine(t, func(t *testing.T, kind engine.Kind) {
		env := newTestEnv(t, kind)
		q := env.queue(t, nil, WithLogger(testdb.QuietLogger()))
		ctx := context.Background()
		claims := []struct {
			name  string
			claim func(types []string) ([]*JobRow, error)
		}{
			{"pool", func(types []string) ([]*JobRow, error) { return q.claim(ctx, types, 10, time.Minute) }},
			{"claim session", func(types []string) ([]*JobRow, error) {
				cur := &claimCursor{q: q, types: types, lease: time.Minute}
				defer cur.closeSession()
				return cur.claim(ctx, 10)
			}},
		}
		for _, c := range claims {
			for _, types := range [][]string{nil, {"other"}, {"other", "default"}} {
				t.Run(fmt.Sprintf("%s/types %v", c.name, types), func(t *testing.T) {
					env.exec(t, "DELETE FROM {t}")
					at := time.Now().UTC().Add(-time.Minute).Truncate(time.Second)
					for i, opts := range [][]EnqueueOption{
						{Type("other")},
						{At(at), ExpiresAt(at.Add(time.Hour)), Type("other"), Policy(RetryPolicy{MaxAttempts: 9, BaseDelay: 7 * time.Second, MaxDelay: 70 * time.Second})},
					} {
						if _, err := q.Enqueue(ctx, testArgs{N: i}, opts...); err != nil {
							t.Fatal(err)
						}
					}
					// An earlier attempt's error and finish time stay on the row.
					env.exec(t, "UPDATE {t} SET error = 'boom', finished_at = created_at, attempts = 1 WHERE scheduled_at = (SELECT MIN(scheduled_at) FROM (SELECT scheduled_at FROM {t}) s)")
					rows, err := c.claim(types)
					if err != nil || len(rows) != 2 {
						t.Fatalf("claim = %d rows, %v; want 2", len(rows), err)
					}
					checkClaimedRows(t, q, rows)
				})
			}
		}
	})
}

// checkClaimedRows checks that each row a claim returned is its job as Get
// reads it back, claimed: in progress, with a token and a lease in UTC.
func checkClaimedRows(t *testing.T, q *Queue, rows []*JobRow) {
	t.Helper()
	for _, got := range rows {
		want := getJob(t, q, got.ID)
		if string(got.Payload) != string(want.Payload) {
			t.Errorf("job %d: payload %s, want %s", got.ID, got.Payload, want.Payload)
		}
		if g, w := fmt.Sprintf("%+v", jobView(got)), fmt.Sprintf("%+v", jobView(want)); g != w {
			t.Errorf("claim returned\n%s\nGet reads\n%s", g, w)
		}
		if got.Status != StatusInProgress || got.ClaimToken == "" || got.LeaseUntil == nil || got.LeaseUntil.Location() != time.UTC {
			t.Errorf("job %d claimed as %+v", got.ID, jobView(got))
		}
	}
}
