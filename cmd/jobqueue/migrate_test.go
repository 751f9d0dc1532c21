package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/testdb"
)

// TestVersion1Table checks, on every engine, that install refuses a version
// 1 table with an error naming migrate, that migrate (whose policy flags are
// required) converts it, and that the jobs are then usable.
func TestVersion1Table(t *testing.T) {
	t.Parallel()
	for _, k := range testdb.Kinds {
		t.Run(string(k), func(t *testing.T) {
			t.Parallel()
			url := testdb.URL(t, k)
			db := testdb.OpenURL(t, url)
			table := testdb.Table(t, db)
			ctx := context.Background()
			// The version 1 DDL of the migrate helper's fixtures.
			ddl, err := os.ReadFile(filepath.Join("..", "..", "migrations", "testdata", "v1_"+string(k)+".sql"))
			if err != nil {
				t.Fatal(err)
			}
			for _, stmt := range splitSQL(strings.ReplaceAll(string(ddl), "{{table}}", table)) {
				if _, err := db.ExecContext(ctx, stmt); err != nil {
					t.Fatalf("%v\n%s", err, stmt)
				}
			}
			tbl, _ := engine.ParseTable(k, table)
			insert := "INSERT INTO " + tbl.Quoted() + ` (name, type, payload, status, retry_count, error, scheduled_at) VALUES
				('send_email', 'email', '{"to":"ada@example.com"}', 'pending', 0, NULL, '2026-01-01 10:00:00'),
				('charge', 'billing', '{"cents":100}', 'failed', 2, 'declined', '2026-01-01 09:00:00')`
			if _, err := db.ExecContext(ctx, insert); err != nil {
				t.Fatal(err)
			}
			c := cli{db: url, table: table}

			assertOneLineError(t, c.run(t, "install"), exitFailure, "outdated", "jobqueue migrate", "--max-attempts")
			assertOneLineError(t, c.run(t, "migrate"), exitUsage, "max-attempts")
			if out := c.ok(t, "migrate", "--max-attempts", "5", "--base-delay", "120", "--max-delay", "3600"); !strings.Contains(out, "version 2") {
				t.Errorf("migrate printed %q", out)
			}
			c.ok(t, "install")
			c.ok(t, "migrate", "--max-attempts", "5", "--base-delay", "120", "--max-delay", "3600") // a second run changes nothing
			assertStats(t, c, "", map[string]int64{"pending": 1, "failed": 1})

			var jobs []map[string]any
			decodeJSON(t, c.ok(t, "list", "--json"), &jobs)
			if len(jobs) != 2 {
				t.Fatalf("list after migrate: %v", jobs)
			}
			for _, j := range jobs {
				if j["max_attempts"] != 5.0 || j["base_delay"] != 120.0 || j["max_delay"] != 3600.0 {
					t.Errorf("job %v does not carry the migration's policy", j["id"])
				}
			}
			// The migrated pending job runs.
			c.ok(t, "work", "--exec", "cat >/dev/null", "--max-jobs", "1")
			assertStats(t, c, "", map[string]int64{"completed": 1, "failed": 1})
		})
	}
}

// splitSQL splits a fixture into statements, dropping -- comments.
func splitSQL(s string) []string {
	var lines []string
	for _, l := range strings.Split(s, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "--") {
			lines = append(lines, l)
		}
	}
	var out []string
	for _, stmt := range strings.Split(strings.Join(lines, "\n"), ";") {
		if strings.TrimSpace(stmt) != "" {
			out = append(out, stmt)
		}
	}
	return out
}
