package migrations

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/testdb"
)

// TestMigrateSQLiteViewsAndTriggersOfOtherTables: SQLite's rebuild drops and
// recreates only the views and triggers that really name the jobs table
// (as a whole identifier, quoted or bare, in any case, or a trigger ON
// it); those of other tables are left alone even when their names or
// their table's name contain the jobs table's name, and a retry_count or
// locked_at column they read is no reason to refuse. A trigger on another
// table whose body writes to the jobs table is recreated and still works.
func TestMigrateSQLiteViewsAndTriggersOfOtherTables(t *testing.T) {
	t.Parallel()
	const table = "mig_jobs"
	cases := []struct {
		name string
		// setup runs after the version 1 table has its rows.
		setup []string
		// refuse is the object Migrate must refuse to recreate; "" when
		// it must succeed.
		refuse string
		// untouched are objects a successful Migrate must leave as they
		// were (not dropped and recreated).
		untouched []string
		// after runs after a successful Migrate; then check returns one
		// string, which must be want.
		after []string
		check string
		want  string
	}{
		{
			name: "view of an archive table whose name contains the table's",
			setup: []string{
				`CREATE TABLE mig_jobs_archive (id INTEGER PRIMARY KEY, name TEXT, retry_count INTEGER)`,
				`INSERT INTO mig_jobs_archive VALUES (1, 'old', 7)`,
				`CREATE VIEW mig_archive_retries AS SELECT id, retry_count FROM mig_jobs_archive`,
			},
			untouched: []string{"mig_archive_retries"},
			check:     `SELECT group_concat(id || ':' || retry_count) FROM mig_archive_retries`,
			want:      "1:7",
		},
		{
			name: "trigger of an archive table reading its retry_count",
			setup: []string{
				`CREATE TABLE mig_jobs_archive (id INTEGER PRIMARY KEY, retry_count INTEGER)`,
				`CREATE TABLE mig_log (note TEXT)`,
				`CREATE TRIGGER mig_jobs_archive_ins AFTER INSERT ON mig_jobs_archive BEGIN INSERT INTO mig_log VALUES ('retries ' || new.retry_count); END`,
				`INSERT INTO mig_jobs_archive VALUES (1, 4)`,
			},
			untouched: []string{"mig_jobs_archive_ins"},
			after:     []string{`INSERT INTO mig_jobs_archive VALUES (2, 5)`},
			check:     `SELECT group_concat(note, ' ') FROM mig_log`,
			want:      "retries 4 retries 5",
		},
		{
			name:   "view naming the table quoted and in upper case, reading retry_count",
			setup:  []string{`CREATE VIEW mig_retries AS SELECT id, retry_count FROM "MIG_JOBS"`},
			refuse: "view mig_retries",
		},
		{
			name:   "view naming the table bare, qualified with main, reading locked_at",
			setup:  []string{`CREATE VIEW mig_locks AS SELECT id, locked_at FROM main.mig_jobs`},
			refuse: "view mig_locks",
		},
		{
			name: "view naming the table in a string only",
			setup: []string{
				`CREATE TABLE mig_other (id INTEGER PRIMARY KEY, retry_count INTEGER)`,
				`CREATE VIEW mig_labelled AS SELECT 'mig_jobs' AS source, retry_count FROM mig_other`,
			},
			untouched: []string{"mig_labelled"},
			check:     `SELECT count(*) FROM mig_labelled`,
			want:      "0",
		},
		{
			name: "view of a view of the table",
			setup: []string{
				`CREATE VIEW mig_named AS SELECT id, name FROM mig_jobs`,
				`CREATE VIEW mig_named_count AS SELECT count(*) AS n FROM mig_named`,
			},
			check: `SELECT n FROM mig_named_count`,
			want:  "3",
		},
		{
			name: "trigger on another table that writes to the jobs table",
			setup: []string{
				`CREATE TABLE mig_orders (id INTEGER PRIMARY KEY)`,
				`CREATE TRIGGER mig_orders_job AFTER INSERT ON mig_orders BEGIN
    INSERT INTO mig_jobs (name, payload, max_attempts, base_delay, max_delay, scheduled_at, created_at)
    VALUES ('order', '{}', 1, 1, 1, '2030-01-01 00:00:00.000000', '2030-01-01 00:00:00.000000');
END`,
			},
			after: []string{`INSERT INTO mig_orders (id) VALUES (1)`},
			check: `SELECT count(*) FROM mig_jobs WHERE name = 'order' AND status = 'pending'`,
			want:  "1",
		},
	}
	for _, c := range cases {
		t.Run(strings.ReplaceAll(c.name, " ", "_"), func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			db := testdb.Open(t, engine.SQLite)
			createV1(t, db, engine.SQLite, table)
			insertV1(t, db, engine.SQLite, table, v1Fixture(engine.SQLite, time.Now().UTC())[:3])
			mustExec(t, db, c.setup...)
			rows, cat := dump(t, db, engine.SQLite, table), readCatalog(t, db, engine.SQLite, table)
			schema := sqliteSchema(t, db)
			err := Migrate(ctx, db, testPolicy, table)
			if c.refuse != "" {
				if err == nil || !strings.Contains(err.Error(), c.refuse) {
					t.Fatalf("Migrate = %v; want a refusal naming %s", err, c.refuse)
				}
				assertSameTable(t, db, engine.SQLite, table, rows, cat, "table after the refusal")
				return
			}
			if err != nil {
				t.Fatalf("Migrate: %v", err)
			}
			now := sqliteSchema(t, db)
			for _, name := range c.untouched {
				if now[name] != schema[name] {
					t.Errorf("%s was dropped and recreated: %q, then %q", name, schema[name], now[name])
				}
			}
			mustExec(t, db, c.after...)
			if got := strings.Join(testdb.Strings(t, db, c.check), ","); got != c.want {
				t.Errorf("%s = %q, want %q", c.check, got, c.want)
			}
		})
	}
}

// sqliteSchema is every schema object of db with its place in
// sqlite_master (a recreated object gets a new one) and SQL text, by name.
func sqliteSchema(t *testing.T, db testdb.Querier) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, s := range testdb.Strings(t, db, `SELECT name || char(1) || rowid || ' ' || sql FROM sqlite_master WHERE sql IS NOT NULL`) {
		name, def, _ := strings.Cut(s, "\x01")
		out[name] = def
	}
	return out
}

// TestSQLiteIdentifiers: the identifiers the rebuild looks for are whole
// names, bare or quoted in SQLite's three ways, in lower case; string
// literals, comments and numbers are not names.
func TestSQLiteIdentifiers(t *testing.T) {
	t.Parallel()
	cases := []struct {
		sql  string
		want []string
	}{
		{`SELECT id FROM jobs`, []string{"select", "id", "from", "jobs"}},
		{`select "Jobs"."ID" from "JOBS" as "j"`, []string{"select", "jobs", "id", "from", "as", "j"}},
		{"SELECT `a``b`, [x y] FROM main.jobs_archive", []string{"select", "a`b", "x y", "from", "main", "jobs_archive"}},
		{`SELECT 'jobs', 'it''s jobs' -- jobs
/* jobs */ FROM t`, []string{"select", "from", "t"}},
		{`SELECT 1e5, x1, $v FROM "a""b"`, []string{"select", "x1", "$v", "from", `a"b`}},
		{`SELECT 'unterminated`, []string{"select"}},
	}
	for _, c := range cases {
		var got []string
		for id := range sqliteIdentifiers(c.sql) {
			got = append(got, id)
		}
		slices.Sort(got)
		want := slices.Clone(c.want)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("sqliteIdentifiers(%q) = %q, want %q", c.sql, got, want)
		}
	}
}
