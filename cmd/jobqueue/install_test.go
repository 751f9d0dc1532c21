package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/testdb"
)

// TestInstall checks `install` on every engine: it creates the table, a
// second run changes nothing, and the table name folds to lower case on
// PostgreSQL only.
func TestInstall(t *testing.T) {
	t.Parallel()
	testdb.ForEachEngine(t, func(t *testing.T, e *testdb.Env) {
		k, url, db := e.Kind, e.URL, e.DB
		table := e.Table(t)
		mixed := strings.ToUpper(table[:1]) + table[1:] // T_… : the same table on PostgreSQL
		c := cli{db: url, table: mixed}
		wantName := mixed
		if k == engine.Postgres {
			wantName = table
		} else {
			// Another table than e.Table's here: drop it and its side tables.
			t.Cleanup(func() { testdb.Drop(t, db, mixed) })
		}
		for run := 1; run <= 2; run++ {
			out := c.ok(t, "install")
			if want := fmt.Sprintf("table %s is installed (%s)\n", wantName, k); out != want {
				t.Errorf("run %d printed %q, want %q", run, out, want)
			}
		}
		tbl := parseTable(t, k, mixed)
		var n int
		if err := db.QueryRowContext(context.Background(), "SELECT COUNT(*) FROM "+tbl.Quoted()).Scan(&n); err != nil || n != 0 {
			t.Errorf("the installed table cannot be read or is not empty: %d, %v", n, err)
		}
	})
}

// TestUninstall checks `uninstall` on every engine, table by table: it
// drops an empty table, refuses one that holds jobs (or is version 1)
// unless --force and then deletes them, drops what a missing table left,
// and never drops a table that is not a jobqueue table.
func TestUninstall(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		setup func(t *testing.T, e *testdb.Env, c cli)
		args  []string
		code  int
		want  []string // substrings of stdout on success, of the one-line error otherwise
		// gone: the table is dropped afterwards (install makes it anew
		// and it is empty); otherwise it is as before, and holds rows.
		gone bool
	}{
		{"empty", func(t *testing.T, e *testdb.Env, c cli) { c.ok(t, "install") },
			nil, 0, []string{"is uninstalled", "0 jobs deleted"}, true},
		{"holding jobs", enqueueTwo, nil, exitFailure, []string{"holds 2 jobs (2 pending)", "--force"}, false},
		{"holding jobs, forced", enqueueTwo, []string{"--force"}, 0, []string{"2 jobs deleted"}, true},
		{"missing", func(*testing.T, *testdb.Env, cli) {}, nil, 0, []string{"was not installed"}, true},
		{"side tables left over", func(t *testing.T, e *testdb.Env, c cli) {
			c.ok(t, "install")
			if _, err := e.DB.ExecContext(context.Background(), "DROP TABLE "+parseTable(t, e.Kind, c.table).Quoted()); err != nil {
				t.Fatal(err)
			}
		}, nil, 0, []string{"was not installed"}, true},
		{"version 1", version1Table, nil, exitFailure, []string{"version 1", "--force", "jobqueue migrate"}, false},
		{"version 1, forced", version1Table, []string{"--force"}, 0, []string{"is uninstalled", "2 jobs deleted"}, true},
		// A status of no jobqueue version (another program's rows; the
		// MySQL ENUM takes none) is counted too: the counts are the
		// drop's own, not Stats' five.
		{"holding jobs of another status", enqueueTwoAndOther, nil, exitFailure, []string{"holds 3 jobs (2 pending, 1 paused)", "--force"}, false},
		{"holding jobs of another status, forced", enqueueTwoAndOther, []string{"--force"}, 0, []string{"3 jobs deleted"}, true},
		{"not a jobqueue table, forced", func(t *testing.T, e *testdb.Env, c cli) {
			q := parseTable(t, e.Kind, c.table).Quoted()
			for _, stmt := range []string{"CREATE TABLE " + q + " (id INT PRIMARY KEY, note VARCHAR(20))", "INSERT INTO " + q + " (id, note) VALUES (1, 'keep me')"} {
				if _, err := e.DB.ExecContext(context.Background(), stmt); err != nil {
					t.Fatal(err)
				}
			}
		}, []string{"--force"}, exitFailure, []string{"not a jobqueue table"}, false},
	}
	testdb.ForEachEngine(t, func(t *testing.T, e *testdb.Env) {
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				c := cli{db: e.URL, table: e.Table(t)}
				tc.setup(t, e, c)
				r := c.run(t, append([]string{"uninstall"}, tc.args...)...)
				if tc.code != 0 {
					assertOneLineError(t, r, tc.code, tc.want...)
				} else if r.code != 0 {
					t.Fatalf("uninstall: exit %d, stderr %q", r.code, r.stderr)
				}
				for _, w := range tc.want {
					if tc.code == 0 && !strings.Contains(r.stdout, w) {
						t.Errorf("uninstall printed %q, want it to contain %q", r.stdout, w)
					}
				}
				var n int
				err := e.DB.QueryRowContext(context.Background(), "SELECT COUNT(*) FROM "+parseTable(t, e.Kind, c.table).Quoted()).Scan(&n)
				switch {
				case tc.gone && err == nil:
					t.Errorf("the table is still there after uninstall (%d rows)", n)
				case !tc.gone && (err != nil || n == 0):
					t.Errorf("the refused table: %d rows, %v; want it kept with its rows", n, err)
				}
				if tc.gone {
					// Nothing of it is left in the way of a fresh install.
					c.ok(t, "install")
					assertStats(t, c, "", nil)
				}
			})
		}
	})
	t.Run("bad table name", func(t *testing.T) {
		c := cli{db: "sqlite:" + filepath.Join(t.TempDir(), "q.db"), table: "bad-name"}
		assertOneLineError(t, c.run(t, "uninstall", "--force"), exitUsage, "table name")
	})
}

// enqueueTwoAndOther is enqueueTwo and a third job whose status is
// 'paused', which no jobqueue version has; it skips the test on MySQL,
// whose status ENUM refuses it.
func enqueueTwoAndOther(t *testing.T, e *testdb.Env, c cli) {
	if e.Kind == engine.MySQL {
		t.Skip("MySQL's status ENUM takes no status but jobqueue's")
	}
	enqueueTwo(t, e, c)
	id, err := strconv.ParseInt(strings.TrimSpace(c.ok(t, "enqueue", "--name", "email")), 10, 64)
	if err != nil {
		t.Fatalf("enqueue printed no id: %v", err)
	}
	if _, err := e.DB.ExecContext(context.Background(), "UPDATE "+parseTable(t, e.Kind, c.table).Quoted()+" SET status = 'paused' WHERE id = "+strconv.FormatInt(id, 10)); err != nil {
		t.Fatal(err)
	}
}

// enqueueTwo installs c's table and enqueues two pending jobs in it.
func enqueueTwo(t *testing.T, _ *testdb.Env, c cli) {
	c.ok(t, "install")
	for range 2 {
		c.ok(t, "enqueue", "--name", "email", "--payload", `{"to":"ada@example.com"}`)
	}
}

// version1Table creates c's table in the version 1 layout with two jobs.
func version1Table(t *testing.T, e *testdb.Env, c cli) {
	ddl, err := os.ReadFile(filepath.Join("..", "..", "migrations", "testdata", "v1_"+string(e.Kind)+".sql"))
	if err != nil {
		t.Fatal(err)
	}
	tbl := parseTable(t, e.Kind, c.table)
	stmts := append(splitSQL(strings.ReplaceAll(string(ddl), "{{table}}", c.table)),
		"INSERT INTO "+tbl.Quoted()+` (name, type, payload, status, retry_count, error, scheduled_at) VALUES
			('send_email', 'email', '{"to":"ada@example.com"}', 'pending', 0, NULL, '2026-01-01 10:00:00'),
			('charge', 'billing', '{"cents":100}', 'failed', 2, 'declined', '2026-01-01 09:00:00')`)
	for _, s := range stmts {
		if _, err := e.DB.ExecContext(context.Background(), s); err != nil {
			t.Fatalf("%v\n%s", err, s)
		}
	}
}
