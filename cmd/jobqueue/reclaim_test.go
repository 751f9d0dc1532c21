package main

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/testdb"
)

// TestReclaimReportsOutcomes: `jobqueue reclaim` says on stdout what became
// of the abandoned attempts it ended (pending again, failed, expired), the
// counts a worker's /metrics would have given as outcome=lost by outcome;
// the command has no /metrics, so before it printed only their total and
// what it did went uncounted. The line agrees with the table.
func TestReclaimReportsOutcomes(t *testing.T) {
	t.Parallel()
	testdb.ForEachEngine(t, func(t *testing.T, e *testdb.Env) {
		c := envCLI(t, e)
		c.ok(t, "install")
		tbl := parseTable(t, e.Kind, c.table)
		cases := []struct {
			name string
			// jobs are enqueue flags, one job each; every one is then
			// left as a worker killed during its attempt leaves it.
			jobs [][]string
			// expire: the jobs whose deadline has passed by the reclaim.
			expire []string
			want   string
			stats  map[string]int64 // the table after the reclaim
		}{
			{"nothing abandoned", nil, nil, "reclaimed 0 jobs\n", map[string]int64{}},
			{"one job pending again", [][]string{{"--name", "one"}}, nil,
				"reclaimed 1 job: 1 pending again, 0 failed, 0 expired\n", map[string]int64{"pending": 1}},
			{"each outcome", [][]string{
				{"--name", "again", "--type", "mail"},
				{"--name", "last", "--type", "mail", "--max-attempts", "1", "--base-delay", "1", "--max-delay", "1"},
				{"--name", "late", "--type", "media", "--expires-in", "1h"},
				{"--name", "late", "--type", "media", "--expires-in", "1h"},
			}, []string{"late"},
				"reclaimed 4 jobs: 1 pending again, 1 failed, 2 expired\n", map[string]int64{"pending": 1, "failed": 1, "expired": 2}},
		}
		for _, tc := range cases {
			if _, err := e.DB.ExecContext(context.Background(), "DELETE FROM "+tbl.Quoted()); err != nil {
				t.Fatal(err)
			}
			for _, flags := range tc.jobs {
				c.ok(t, append([]string{"enqueue"}, flags...)...)
			}
			past := e.Kind.TimeArg(time.Now().Add(-time.Hour))
			updateJobs(t, e, tbl, "status = 'in_progress', attempts = attempts + 1, claim_token = 'crashed', lease_until = "+placeholder(e.Kind, 1), past)
			for _, name := range tc.expire {
				updateJobs(t, e, tbl, "expires_at = "+placeholder(e.Kind, 1)+" WHERE name = "+placeholder(e.Kind, 2), past, name)
			}
			if out := c.ok(t, "reclaim"); out != tc.want {
				t.Errorf("%s: reclaim printed %q, want %q", tc.name, out, tc.want)
			}
			assertStats(t, c, "", tc.stats)
		}
	})
}

// updateJobs runs UPDATE tbl SET set with args (set may end with a WHERE).
func updateJobs(t *testing.T, e *testdb.Env, tbl engine.Table, set string, args ...any) {
	t.Helper()
	if _, err := e.DB.ExecContext(context.Background(), "UPDATE "+tbl.Quoted()+" SET "+set, args...); err != nil {
		t.Fatal(err)
	}
}

// placeholder is the i-th (from 1) query parameter's placeholder on k.
func placeholder(k engine.Kind, i int) string {
	if k == engine.Postgres {
		return fmt.Sprintf("$%d", i)
	}
	return "?"
}
