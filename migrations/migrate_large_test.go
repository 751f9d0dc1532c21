package migrations

import (
	"context"
	"database/sql"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/testdb"
)

// largeRows is how many jobs TestMigrateLarge migrates; JOBQUEUE_TEST_MIGRATE_ROWS
// changes it (for measuring).
func largeRows(t *testing.T) int {
	if v := os.Getenv("JOBQUEUE_TEST_MIGRATE_ROWS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("JOBQUEUE_TEST_MIGRATE_ROWS=%q is not a positive number", v)
		}
		return n
	}
	return 100_000
}

// TestMigrateLarge migrates a version 1 table of 100 000 jobs: the
// conversion is set-based, so it takes seconds, not a round trip per row.
// It logs the time Migrate took, and asserts none: the machine running the
// tests may be loaded, and timing belongs in benchmarks.
func TestMigrateLarge(t *testing.T) {
	t.Parallel()
	n := largeRows(t)
	testdb.ForEachEngine(t, func(t *testing.T, e *testdb.Env) {
		ctx := context.Background()
		k, db := e.Kind, e.DB
		table := e.Table(t)
		createV1(t, db, k, table)
		now := time.Now().UTC().Truncate(time.Second)
		statuses := []string{"pending", "in_progress", "completed", "failed"}
		jobs := make([]v1Job, n)
		want := map[string]int{}
		for i := range jobs {
			j := v1Job{
				ID: int64(i + 1), Name: "job", Type: []string{"default", "email"}[i%2],
				Payload: `{"i":` + strconv.Itoa(i) + `,"s":"données 🚀"}`, Status: statuses[i%4],
				RetryCount: (i / 4) % 5, ScheduledAt: now.Add(-time.Duration(i%3600) * time.Second),
				CreatedAt: now.Add(-2 * time.Hour),
			}
			switch (i / 20) % 3 {
			case 1:
				j.ExpiresAt = ptr(now.Add(-time.Hour))
			case 2:
				j.ExpiresAt = ptr(now.Add(time.Hour))
			}
			jobs[i] = j
			want[expectV2(j, k, testPolicy, now, j.Payload).Status]++
		}
		start := time.Now()
		insertV1Bulk(t, k, db, table, jobs)
		t.Logf("%s: inserted %d version 1 rows in %v", k, n, time.Since(start).Round(time.Millisecond))

		start = time.Now()
		if err := Migrate(ctx, db, testPolicy, table); err != nil {
			t.Fatal(err)
		}
		took := time.Since(start)
		t.Logf("%s: Migrate of %d rows took %v", k, n, took.Round(time.Millisecond))

		got := map[string]int{}
		rows, err := db.QueryContext(ctx, "SELECT status, count(*) FROM "+engine.Table{Kind: k, Name: table}.Quoted()+" GROUP BY status")
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		for rows.Next() {
			var s string
			var c int
			if err := rows.Scan(&s, &c); err != nil {
				t.Fatal(err)
			}
			got[s] = c
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("jobs per status (-want +got):\n%s", diff)
		}
	})
}

// insertV1Bulk writes jobs into a version 1 table in multi-row INSERTs of
// 1000 rows (created_at as Unix seconds on MySQL, SQLite's plain text form).
func insertV1Bulk(t *testing.T, k engine.Kind, db *sql.DB, table string, jobs []v1Job) {
	t.Helper()
	const chunk = 1000
	tb := engine.Table{Kind: k, Name: table}
	for lo := 0; lo < len(jobs); lo += chunk {
		hi := min(lo+chunk, len(jobs))
		var b strings.Builder
		b.WriteString("INSERT INTO " + tb.Quoted() + " (id, name, type, payload, status, retry_count, error, scheduled_at, locked_at, expires_at, created_at) VALUES ")
		args := make([]any, 0, (hi-lo)*11)
		ph := func(v any) string {
			args = append(args, v)
			if k == engine.Postgres {
				return "$" + strconv.Itoa(len(args))
			}
			return "?"
		}
		tm := func(v *time.Time) any {
			if v == nil {
				return nil
			}
			if k == engine.SQLite {
				return sqliteV1Time(*v, sqlitePlain)
			}
			return k.TimeArg(*v)
		}
		for i, j := range jobs[lo:hi] {
			if i > 0 {
				b.WriteString(", ")
			}
			vals := []string{ph(j.ID), ph(j.Name), ph(j.Type), ph(j.Payload), ph(j.Status), ph(j.RetryCount), ph(j.Error),
				ph(tm(&j.ScheduledAt)), ph(tm(j.LockedAt)), ph(tm(j.ExpiresAt))}
			if k == engine.MySQL {
				vals = append(vals, "FROM_UNIXTIME("+ph(j.CreatedAt.Unix())+")")
			} else {
				vals = append(vals, ph(tm(&j.CreatedAt)))
			}
			b.WriteString("(" + strings.Join(vals, ", ") + ")")
		}
		if _, err := db.ExecContext(context.Background(), b.String(), args...); err != nil {
			t.Fatalf("insert version 1 rows: %v", err)
		}
	}
}
