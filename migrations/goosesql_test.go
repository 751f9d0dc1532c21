package migrations

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/jobqueue/jobqueue/internal/ddl"
	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/testdb"
	"github.com/jobqueue/jobqueue/queue"
)

// gooseCommand is the goose command of the version tools.go pins, built
// once per test binary (by gooseBinary) into a temp dir that TestMain
// removes.
var gooseCommand struct {
	once      sync.Once
	dir, path string
	err       error
}

// gooseBinary builds the goose command pinned in go.mod (tools.go) once
// and returns its path. The build leaves out the drivers of databases
// jobqueue does not support, which only makes it faster.
func gooseBinary(t *testing.T) string {
	t.Helper()
	g := &gooseCommand
	g.once.Do(func() {
		if g.dir, g.err = os.MkdirTemp("", "jobqueue-goose-cmd-"); g.err != nil {
			return
		}
		g.path = filepath.Join(g.dir, "goose")
		gobin := testdb.GoBinary()
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
		defer cancel()
		build := exec.CommandContext(ctx, gobin, "build", "-tags", "no_clickhouse,no_libsql,no_mssql,no_vertica,no_ydb",
			"-o", g.path, "github.com/pressly/goose/v3/cmd/goose")
		if out, err := build.CombinedOutput(); err != nil {
			g.err = fmt.Errorf("build the goose command: %v\n%s", err, out)
		}
	})
	if g.err != nil {
		t.Fatal(g.err)
	}
	return g.path
}

// removeGooseBinary removes what gooseBinary built (called by TestMain).
func removeGooseBinary() {
	if gooseCommand.dir != "" {
		os.RemoveAll(gooseCommand.dir)
	}
}

// gooseDirFor writes the goose file of table name into a new directory and
// returns it with the name of goose's version table for it, dropped when
// the test ends.
func gooseDirFor(t *testing.T, e *testdb.Env, name string) (dir, versionTable string) {
	t.Helper()
	versionTable = "goose_" + name
	t.Cleanup(func() {
		if _, err := e.DB.Exec("DROP TABLE IF EXISTS " + (engine.Table{Kind: e.Kind, Name: versionTable}).Quoted()); err != nil {
			t.Logf("drop goose's version table: %v", err)
		}
	})
	text, err := GooseSQL(string(e.Kind), name)
	if err != nil {
		t.Fatal(err)
	}
	dir = t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "20260101000000_jobqueue_"+name+".sql"), []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir, versionTable
}

// runGooseCommand runs `goose -dir dir -table versionTable <dialect> DSN
// command` on the env's database and fails the test if goose fails.
func runGooseCommand(t *testing.T, e *testdb.Env, dir, versionTable, command string) string {
	t.Helper()
	out, err := gooseCommandOutput(t, e, dir, versionTable, command)
	if err != nil {
		t.Fatalf("goose %s: %v\n%s", command, err, out)
	}
	return out
}

// gooseCommandOutput runs `goose -dir dir -table versionTable <dialect>
// DSN command` on the env's database and returns what goose printed and
// how it ended.
func gooseCommandOutput(t *testing.T, e *testdb.Env, dir, versionTable, command string) (string, error) {
	t.Helper()
	_, dsn, _, err := engine.DriverDSN(e.URL)
	if err != nil {
		t.Fatal(err)
	}
	dialect := map[engine.Kind]string{engine.Postgres: "postgres", engine.MySQL: "mysql", engine.SQLite: "sqlite3"}[e.Kind]
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, gooseBinary(t), "-dir", dir, "-table", versionTable, dialect, dsn, command)
	cmd.Env = append(os.Environ(), "GOOSE_DRIVER=", "GOOSE_DBSTRING=", "GOOSE_MIGRATION_DIR=")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	return out.String(), err
}

// tablesSnapshot is the snapshot (see takeSnapshot) of the jobs table tb
// and of each of its side tables, in the order of ddl.SideTables, keyed
// by the table's name with tb's name replaced by T.
func tablesSnapshot(t *testing.T, e *testdb.Env, tb engine.Table) map[string]snapshot {
	t.Helper()
	out := map[string]snapshot{"T": takeSnapshot(t, e.DB, tb)}
	for _, st := range ddl.SideTables() {
		side := ddl.Side(tb, st.Suffix)
		out["T_"+st.Suffix] = takeSnapshot(t, e.DB, side)
	}
	return out
}

var sqliteRootPageRE = regexp.MustCompile(` page \d+:`)

// comparable is s with tb's name replaced by T and what differs between
// any two tables' catalogs removed: PostgreSQL's index OIDs and SQLite's
// root pages.
func comparable(s snapshot, k engine.Kind, name string) snapshot {
	s = s.normalized(name)
	switch k {
	case engine.Postgres:
		s.IDs = nil
	case engine.SQLite:
		for i, id := range s.IDs {
			s.IDs[i] = sqliteRootPageRE.ReplaceAllString(id, " page N:")
		}
	}
	return s
}

// TestGooseCommandRunsGooseSQL runs the goose command, built from the
// version tools.go pins, over the file GooseSQL writes: `goose up` creates
// what Install creates (the jobs table, its indexes, its side tables, as
// the catalogs show them), Install afterwards changes nothing, the queue
// opens the table, and `goose down` removes the table and its side tables.
func TestGooseCommandRunsGooseSQL(t *testing.T) {
	t.Parallel()
	testdb.ForEachEngine(t, func(t *testing.T, e *testdb.Env) {
		ctx := context.Background()
		name, installed := e.Table(t), e.Table(t)
		tb, ref := tableOf(t, e.Kind, name), tableOf(t, e.Kind, installed)
		dir, versionTable := gooseDirFor(t, e, name)
		runGooseCommand(t, e, dir, versionTable, "up")
		if st, err := inspect(ctx, e.DB, tb); err != nil || st != tableV2 {
			t.Fatalf("after goose up: table %s is %v (%v); want version 2", name, st, err)
		}

		if err := Install(ctx, e.DB, installed); err != nil {
			t.Fatal(err)
		}
		byGoose := tablesSnapshot(t, e, tb)
		byInstall := tablesSnapshot(t, e, ref)
		for key := range byInstall {
			got, want := comparable(byGoose[key], e.Kind, name), comparable(byInstall[key], e.Kind, installed)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("%s: goose up on the generated file (+) differs from Install (-):\n%s", key, diff)
			}
			if len(got.Columns) == 0 {
				t.Errorf("%s: goose up created no table", key)
			}
		}
		if n := len(byInstall["T"].Columns); n != 16 {
			t.Errorf("the installed table has %d columns, want 16", n)
		}

		if err := Install(ctx, e.DB, name); err != nil {
			t.Fatalf("Install after goose up: %v", err)
		}
		if diff := cmp.Diff(byGoose, tablesSnapshot(t, e, tb)); diff != "" {
			t.Errorf("Install after goose up changed the catalog (-before +after):\n%s", diff)
		}
		q, err := queue.New(e.DB, queue.WithTable(name))
		if err != nil {
			t.Fatalf("queue.New on the table goose created: %v", err)
		}
		if err := q.Close(); err != nil {
			t.Fatal(err)
		}

		runGooseCommand(t, e, dir, versionTable, "down")
		for _, o := range ddl.Objects(tb) {
			if o.Drop == "" {
				continue
			}
			if st, err := inspect(ctx, e.DB, o.Table); err != nil || st != tableMissing {
				t.Errorf("after goose down: %s %s is %v (%v); want it gone", o.Kind, o.Name, st, err)
			}
			if cols := testColumns(t, e.DB, o.Table); len(cols) != 0 {
				t.Errorf("after goose down: %s %s still has columns %v", o.Kind, o.Name, cols)
			}
		}
		if st, err := inspect(ctx, e.DB, ref); err != nil || st != tableV2 {
			t.Errorf("goose down touched another table: %s is %v (%v)", installed, st, err)
		}
	})
}

func TestGooseSQLText(t *testing.T) {
	t.Parallel()
	testdb.ForEachKind(t, func(t *testing.T, k engine.Kind) {
		text, err := GooseSQL(string(k), "Jobs")
		if err != nil {
			t.Fatal(err)
		}
		name := "Jobs"
		if k == engine.Postgres {
			name = "jobs" // folded, as Install folds it
		}
		tb := tableOf(t, k, name)
		up, down, ok := strings.Cut(text, "\n-- +goose Down\n")
		if !ok || strings.Count(text, "-- +goose Up\n") != 1 || strings.Index(text, "-- +goose Up") > strings.Index(text, "-- +goose Down") {
			t.Fatalf("want one Up section followed by one Down section:\n%s", text)
		}
		for _, o := range ddl.Objects(tb) {
			if !strings.Contains(up, "\n"+o.Create+";\n") {
				t.Errorf("Up lacks %s %s:\n%s", o.Kind, o.Name, o.Create)
			}
			if o.Drop != "" && !strings.Contains(down, "\n"+o.Drop+";\n") {
				t.Errorf("Down lacks %q", o.Drop)
			}
		}
		// Up drops nothing but the temporary tables of its own checks
		// (SQLite's side checks).
		upDrops := regexp.MustCompile(`DROP TABLE (IF EXISTS )?temp\."jobqueue_check_[A-Za-z0-9_]+"`).ReplaceAllString(up, "")
		if strings.Contains(down, "CREATE") || strings.Contains(upDrops, "DROP") {
			t.Errorf("Up drops or Down creates:\n%s", text)
		}
		for _, s := range []string{"Install", "jobqueue migrate --db URL --table " + name, "GooseMigrations(db, \"" + name + "\"", "version 1", "--engine " + string(k)} {
			if !strings.Contains(up, s) {
				t.Errorf("header does not mention %q", s)
			}
		}
	})
}

func TestGooseSQLRejectsBadInput(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, engine, table string
		want                error
	}{
		{"unknown engine", "oracle", "jobs", ErrUnsupportedDatabase},
		{"empty engine", "", "jobs", ErrUnsupportedDatabase},
		{"bad table name", "sqlite", "jobs;drop", ErrInvalidTableName},
		{"empty table name", "mysql", "", ErrInvalidTableName},
		{"too long for postgres", "postgres", strings.Repeat("a", 51), ErrInvalidTableName},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			text, err := GooseSQL(c.engine, c.table)
			if !errors.Is(err, c.want) || text != "" {
				t.Errorf("GooseSQL(%q, %q) = %d bytes, %v; want nothing and %v", c.engine, c.table, len(text), err, c.want)
			}
		})
	}
	// The control: the longest PostgreSQL name and the aliases are accepted.
	for _, e := range []string{"postgres", "postgresql", "mysql", "mariadb", "sqlite", "sqlite3"} {
		if _, err := GooseSQL(e, strings.Repeat("a", 50)); err != nil {
			t.Errorf("GooseSQL(%q, 50 characters): %v", e, err)
		}
	}
}

// TestGooseStatementWrapsSemicolons: a statement with semicolons of its own
// (a trigger's body) goes between StatementBegin and StatementEnd, others
// do not.
func TestGooseStatementWrapsSemicolons(t *testing.T) {
	t.Parallel()
	cases := []struct{ name, stmt, want string }{
		{"plain", `CREATE TABLE IF NOT EXISTS "a" (id INTEGER)`, "\nCREATE TABLE IF NOT EXISTS \"a\" (id INTEGER);\n"},
		{"trigger", "CREATE TRIGGER IF NOT EXISTS t AFTER DELETE ON a BEGIN DELETE FROM b; END",
			"\n-- +goose StatementBegin\nCREATE TRIGGER IF NOT EXISTS t AFTER DELETE ON a BEGIN DELETE FROM b; END;\n-- +goose StatementEnd\n"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var b strings.Builder
			writeGooseStatement(&b, c.stmt)
			if diff := cmp.Diff(c.want, b.String()); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
