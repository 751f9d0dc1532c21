package main

import (
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/testdb"
)

// TestVersion1Table checks, on every engine, that install refuses a version
// 1 table with an error naming migrate, that migrate (whose policy flags are
// required) converts it, and that the jobs are then usable.
func TestVersion1Table(t *testing.T) {
	t.Parallel()
	testdb.ForEachEngine(t, func(t *testing.T, e *testdb.Env) {
		url := e.URL
		table := e.Table(t)
		c := cli{db: url, table: table}
		version1Table(t, e, c)

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

// TestHalfMigratedTable checks that every command refuses a table whose
// migration was interrupted, with the one-line error naming migrate, and
// changes nothing: a version 2 table that still has retry_count (every
// engine), and on MySQL the table as the first step of Migrate leaves it
// (the version 2 columns added, NULL in every row, retry_count and locked_at
// still there), on which the queue's own check passes.
func TestHalfMigratedTable(t *testing.T) {
	t.Parallel()
	shapes := []struct {
		name  string
		only  engine.Kind // "" for every engine
		setup func(t *testing.T, db *sql.DB, c cli, tbl engine.Table)
	}{
		{"retry_count left", "", func(t *testing.T, db *sql.DB, c cli, tbl engine.Table) {
			c.ok(t, "install")
			c.ok(t, "enqueue", "--name", "k")
			if _, err := db.Exec("ALTER TABLE " + tbl.Quoted() + " ADD COLUMN retry_count INTEGER NOT NULL DEFAULT 0"); err != nil {
				t.Fatal(err)
			}
		}},
		{"after the first step", engine.MySQL, func(t *testing.T, db *sql.DB, c cli, tbl engine.Table) {
			ddl, err := os.ReadFile(filepath.Join("..", "..", "migrations", "testdata", "v1_mysql.sql"))
			if err != nil {
				t.Fatal(err)
			}
			stmts := splitSQL(strings.ReplaceAll(string(ddl), "{{table}}", tbl.Name))
			stmts = append(stmts,
				"INSERT INTO "+tbl.Quoted()+" (name, payload, status, retry_count, scheduled_at) VALUES ('k', '{}', 'pending', 0, '2026-01-01 00:00:00')",
				"ALTER TABLE "+tbl.Quoted()+" MODIFY status ENUM('pending','in_progress','completed','failed','expired') NOT NULL DEFAULT 'pending',"+
					" MODIFY created_at DATETIME NOT NULL, ADD COLUMN attempts INT UNSIGNED NULL AFTER status,"+
					" ADD COLUMN claim_token VARCHAR(64) NULL AFTER attempts, ADD COLUMN lease_until DATETIME NULL AFTER claim_token,"+
					" ADD COLUMN max_attempts INT UNSIGNED NULL AFTER lease_until, ADD COLUMN base_delay INT UNSIGNED NULL AFTER max_attempts,"+
					" ADD COLUMN max_delay INT UNSIGNED NULL AFTER base_delay, ADD COLUMN finished_at DATETIME NULL AFTER expires_at")
			for _, s := range stmts {
				if _, err := db.Exec(s); err != nil {
					t.Fatalf("%v\n%s", err, s)
				}
			}
		}},
	}
	testdb.ForEachEngine(t, func(t *testing.T, e *testdb.Env) {
		for _, sh := range shapes {
			if sh.only != "" && sh.only != e.Kind {
				continue
			}
			t.Run(sh.name, func(t *testing.T) {
				t.Parallel()
				url, db := e.URL, e.DB
				table := e.Table(t)
				tbl, err := engine.ParseTable(e.Kind, table)
				if err != nil {
					t.Fatal(err)
				}
				c := cli{db: url, table: table, timeout: 30 * time.Second}
				sh.setup(t, db, c, tbl)
				dump := func() string {
					var n int
					var s sql.NullString
					if err := db.QueryRow("SELECT COUNT(*), MAX(status) FROM "+tbl.Quoted()).Scan(&n, &s); err != nil {
						t.Fatal(err)
					}
					return fmt.Sprint(n, s.String)
				}
				before := dump()
				for _, args := range [][]string{
					{"stats"}, {"list", "--json"}, {"show", "1"}, {"enqueue", "--name", "k"}, {"retry", "1"},
					{"expire"}, {"reclaim"}, {"prune", "--older-than", "1s"}, {"work", "--exec", "cat", "--max-jobs", "1", "--max-runtime", "5s"},
				} {
					assertOneLineError(t, c.run(t, args...), exitFailure, "outdated", "jobqueue migrate")
				}
				if after := dump(); after != before {
					t.Errorf("the refused table changed: %s, was %s", after, before)
				}
			})
		}
	})
}

// TestMigrateErrorNamesTheCommand: a migration that fails tells the CLI
// user which command to run again, with the same flags, not the Go API's
// Migrate (SQLite: a table under the name Migrate rebuilds into stands in
// the way; nothing changes).
func TestMigrateErrorNamesTheCommand(t *testing.T) {
	t.Parallel()
	e := testdb.New(t, engine.SQLite)
	table := e.Table(t)
	c := cli{db: e.URL, table: table}
	version1Table(t, e, c)
	blocker := parseTable(t, e.Kind, table+"__jobqueue_v2")
	if _, err := e.DB.Exec("CREATE TABLE " + blocker.Quoted() + " (x INTEGER)"); err != nil {
		t.Fatal(err)
	}
	res := c.run(t, "migrate", "--max-attempts", "5", "--base-delay", "120", "--max-delay", "3600")
	assertOneLineError(t, res, exitFailure, "rename or drop it",
		"run 'jobqueue migrate --table "+table+" --max-attempts 5 --base-delay 120 --max-delay 3600' again")
	if strings.Contains(res.stderr, "run Migrate again") {
		t.Errorf("the error names the Go API's Migrate: %s", res.stderr)
	}
	assertOneLineError(t, c.run(t, "install"), exitFailure, "outdated", "jobqueue migrate")
}
