package queue

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/testdb"
)

// TestMySQLClaimFrontier: a claim that holds the claim mutex after a full
// claim starts past the newest job in progress when that lies beyond its
// claimer's watermark (mysqlClaimSession.frontier), so it does not pass
// over the batches other claimers took meanwhile; a claimer of several
// types, one whose last claim was short, and a rescan from the start keep
// to their own start, and a frontier behind the watermark is not taken.
//
// Setup of each case, on a table of its own: jobs 1–3 are enqueued and
// claimer A claims them (asking for aFirst); jobs 4–12 are enqueued and
// claimer B claims 4–6; job 5 goes back to pending keeping its place (as a
// released job does), so the newest job in progress is 6. Then A claims 3
// more past its watermark (job 3), or from the start.
func TestMySQLClaimFrontier(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		types     []string
		aFirst    int  // how many A's first claim asks for (3: a full claim)
		fromStart bool // A's second claim is a rescan
		want      []int64
	}{
		{"all types, after a full claim", nil, 3, false, []int64{7, 8, 9}},
		{"one type, after a full claim", []string{"default"}, 3, false, []int64{7, 8, 9}},
		{"several types keep the watermark", []string{"default", "other"}, 3, false, []int64{5, 7, 8}},
		{"after a short claim", nil, 20, false, []int64{5, 7, 8}},
		{"a rescan starts from the start", nil, 3, true, []int64{5, 7, 8}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			env, q, a, b := frontierClaimers(t)
			enqueueSeq(t, q, 3)
			first := frontierClaim(t, q, a, tc.types, tc.aFirst, claimPos{})
			assertIDs(t, "A's first claim", first, []int64{1, 2, 3})
			enqueueSeq(t, q, 9)
			assertIDs(t, "B's claim", frontierClaim(t, q, b, tc.types, 3, claimPos{}), []int64{4, 5, 6})
			backToPending(t, env, q, 5)
			after := claimPos{}
			if !tc.fromStart {
				after = posOf(first[len(first)-1])
			}
			assertIDs(t, "A's second claim", frontierClaim(t, q, a, tc.types, 3, after), tc.want)
		})
	}

	t.Run("a frontier behind the watermark is not taken", func(t *testing.T) {
		t.Parallel()
		env, q, a, b := frontierClaimers(t)
		enqueueSeq(t, q, 12)
		first := frontierClaim(t, q, a, nil, 3, claimPos{})
		assertIDs(t, "A's first claim", first, []int64{1, 2, 3})
		assertIDs(t, "B's claim", frontierClaim(t, q, b, nil, 3, claimPos{}), []int64{4, 5, 6})
		second := frontierClaim(t, q, a, nil, 3, posOf(first[2]))
		assertIDs(t, "A's second claim", second, []int64{7, 8, 9})
		// A's 7 and 9 end and 8 goes back to pending: the newest job in
		// progress is B's 6, behind A's watermark (9).
		backToPending(t, env, q, 8)
		if _, err := env.db.ExecContext(context.Background(),
			"UPDATE "+q.run.quoted+" SET status = 'completed', claim_token = NULL, lease_until = NULL WHERE id IN (7, 9)"); err != nil {
			t.Fatal(err)
		}
		assertIDs(t, "A's third claim", frontierClaim(t, q, a, nil, 3, posOf(second[2])), []int64{10, 11, 12})
	})
}

// frontierClaimers makes a MySQL table of its own, a queue on it and two
// claim sessions, claimers A and B.
func frontierClaimers(t *testing.T) (env *testEnv, q *Queue, a, b *mysqlClaimSession) {
	t.Helper()
	env = newTestEnv(t, engine.MySQL)
	q = env.queue(t, nil, WithLogger(testdb.QuietLogger()))
	a, _ = mutexTestSession(t, q, 30)
	b, _ = mutexTestSession(t, q, 30)
	return env, q, a, b
}

// frontierClaim claims up to max jobs of types on cs past after.
func frontierClaim(t *testing.T, q *Queue, cs *mysqlClaimSession, types []string, max int, after claimPos) []*JobRow {
	t.Helper()
	now := q.now()
	rows, err := cs.claim(context.Background(), types, max, newClaimToken(), now, now.Add(time.Minute), after)
	if err != nil {
		t.Fatalf("claim: %v", err)
	}
	return rows
}

// backToPending puts job id back to pending with its scheduled_at, as a
// released attempt does.
func backToPending(t *testing.T, env *testEnv, q *Queue, id int64) {
	t.Helper()
	if _, err := env.db.ExecContext(context.Background(),
		"UPDATE "+q.run.quoted+" SET status = 'pending', claim_token = NULL, lease_until = NULL WHERE id = ?", id); err != nil {
		t.Fatal(err)
	}
}

// posOf is row's place in the claim order.
func posOf(row *JobRow) claimPos { return claimPos{at: row.ScheduledAt, id: row.ID} }

// assertIDs fails unless rows are the jobs want, in that order.
func assertIDs(t *testing.T, what string, rows []*JobRow, want []int64) {
	t.Helper()
	if diff := cmp.Diff(want, ids(rows)); diff != "" {
		t.Fatalf("%s: ids (-want +got):\n%s", what, diff)
	}
}
