package migrations

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/pressly/goose/v3"

	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/testdb"
)

// checkRunAgain fails t unless err is a *RunAgainError naming step and
// table, whose text advises to run step again once (the inner errors said
// "run Migrate again" too, so the advice came twice) and says want.
func checkRunAgain(t *testing.T, err error, step, table string, want ...string) *RunAgainError {
	t.Helper()
	var again *RunAgainError
	if !errors.As(err, &again) {
		t.Fatalf("error %v (%T): want a *RunAgainError", err, err)
	}
	if again.Step != step || again.Table != table {
		t.Errorf("RunAgainError Step %q, Table %q; want %q, %q", again.Step, again.Table, step, table)
	}
	msg := err.Error()
	if n := strings.Count(msg, "run "+step+" again"); n != 1 {
		t.Errorf("error %q advises %d times to run %s again; want once", msg, n, step)
	}
	if strings.Count(msg, " again") != 1 {
		t.Errorf("error %q: want one advice to run something again", msg)
	}
	for _, w := range want {
		if !strings.Contains(msg, w) {
			t.Errorf("error %q does not say %q", msg, w)
		}
	}
	cli := *again
	cli.Step = "'tool redo'"
	if got := cli.Error(); !strings.Contains(got, "run 'tool redo' again") || strings.Contains(got, "run "+step) {
		t.Errorf("with Step %q the error says %q", cli.Step, got)
	}
	return again
}

// TestMigrateRunAgainError: a migration interrupted after a step, or (on
// PostgreSQL and SQLite) refused by a read-only connection, is a
// *RunAgainError (Step "Migrate") wrapping the cause, saying on MySQL to
// use the same policy; running Migrate again then completes.
func TestMigrateRunAgainError(t *testing.T) {
	t.Parallel()
	testdb.ForEachEngine(t, func(t *testing.T, e *testdb.Env) {
		ctx := context.Background()
		table := v1Table(t, e, v1Fixture(e.Kind, time.Now().UTC()))
		err := migrate(ctx, e.DB, testPolicy, table, migrateOptions{afterStep: func(int, string) error { return errInjected }})
		if !errors.Is(err, errInjected) {
			t.Fatalf("migrate = %v; want the injected failure", err)
		}
		want := map[engine.Kind]string{
			engine.Postgres: "nothing was changed",
			engine.SQLite:   "nothing was changed",
			engine.MySQL:    "again with the same policy",
		}[e.Kind]
		checkRunAgain(t, err, "Migrate", table, want)
		if e.Kind != engine.MySQL {
			// A real failure: a connection that accepts no writes.
			ro := testdb.OpenURL(t, readOnlyURL(t, e))
			checkRunAgain(t, Migrate(ctx, ro, testPolicy, table), "Migrate", table, "nothing was changed")
		}
		if err := Migrate(ctx, e.DB, testPolicy, table); err != nil {
			t.Fatalf("Migrate again: %v", err)
		}
	})
}

// TestMigrateRunAgainAdviceOnce: a migration refused by a check of the
// conversion (SQLite: a table under the name the rebuild uses) advises to
// run Migrate again once, after the fix; the check's own text said "rename
// or drop it and run Migrate again", and the wrapper said it again. The
// same failure under GooseMigrations advises to run goose up again, not
// Migrate.
func TestMigrateRunAgainAdviceOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := testdb.New(t, engine.SQLite)
	table := v1Table(t, e, v1Fixture(e.Kind, time.Now().UTC()))
	mustExec(t, e.DB, `CREATE TABLE "`+table+`__jobqueue_v2" (x INTEGER)`)

	err := Migrate(ctx, e.DB, testPolicy, table)
	checkRunAgain(t, err, "Migrate", table, "rename or drop it", "nothing was changed")

	ms, err := GooseMigrations(e.DB, table, testPolicy, 1)
	if err != nil {
		t.Fatal(err)
	}
	p, err := goose.NewProvider(goose.DialectSQLite3, e.DB, nil,
		goose.WithGoMigrations(ms...), goose.WithDisableGlobalRegistry(true), goose.WithTableName(e.Table(t)))
	if err != nil {
		t.Fatal(err)
	}
	_, err = p.Up(ctx)
	var again *RunAgainError
	if !errors.As(err, &again) || again.Step != "goose up" || !strings.Contains(err.Error(), "run goose up again") || strings.Contains(err.Error(), "Migrate again") {
		t.Errorf("goose up = %v; want a *RunAgainError advising to run goose up again", err)
	}
}

// TestUninstallRunAgainError: an Uninstall refused for a foreign key of
// another table (every engine) or whose DROP fails (a read-only connection
// on PostgreSQL and SQLite) is a *RunAgainError (Step "Uninstall");
// refusals that running again cannot cure (not a jobqueue table, a bad
// name) are not.
func TestUninstallRunAgainError(t *testing.T) {
	t.Parallel()
	testdb.ForEachEngine(t, func(t *testing.T, e *testdb.Env) {
		ctx := context.Background()
		t.Run("foreign_key", func(t *testing.T) {
			tb := tableOf(t, e.Kind, e.Table(t))
			if err := Install(ctx, e.DB, tb.Name); err != nil {
				t.Fatal(err)
			}
			drop, _ := childOf(t, e.DB, tb, tb, "id")
			err := Uninstall(ctx, e.DB, tb.Name)
			checkRunAgain(t, err, "Uninstall", tb.Name, "drop those foreign keys", "nothing was dropped")
			mustExec(t, e.DB, drop)
			if err := Uninstall(ctx, e.DB, tb.Name); err != nil {
				t.Fatalf("Uninstall again: %v", err)
			}
		})
		if e.Kind != engine.MySQL {
			t.Run("read_only", func(t *testing.T) {
				tb := tableOf(t, e.Kind, e.Table(t))
				if err := Install(ctx, e.DB, tb.Name); err != nil {
					t.Fatal(err)
				}
				ro := testdb.OpenURL(t, readOnlyURL(t, e))
				err := Uninstall(ctx, ro, tb.Name)
				checkRunAgain(t, err, "Uninstall", tb.Name, "nothing was dropped (one transaction)")
				if err := Check(ctx, e.DB, tb.Name); err != nil {
					t.Errorf("table after the failed Uninstall: %v", err)
				}
			})
		}
		t.Run("not_cured_by_running_again", func(t *testing.T) {
			other := tableOf(t, e.Kind, e.Table(t))
			mustExec(t, e.DB, "CREATE TABLE "+other.Quoted()+" (x INT)")
			for _, name := range []string{other.Name, "no such; table"} {
				err := Uninstall(ctx, e.DB, name)
				var again *RunAgainError
				if err == nil || errors.As(err, &again) {
					t.Errorf("Uninstall(%q) = %v; want an error that is no *RunAgainError", name, err)
				}
			}
			err := Migrate(ctx, e.DB, RetryPolicy{}, other.Name)
			var again *RunAgainError
			if !errors.Is(err, ErrInvalidPolicy) || errors.As(err, &again) {
				t.Errorf("Migrate with no policy = %v; want ErrInvalidPolicy, no *RunAgainError", err)
			}
			// It said "choose another table name (nothing was changed;
			// fix the cause and run Migrate again)".
			err = Migrate(ctx, e.DB, testPolicy, other.Name)
			if !errors.Is(err, ErrForeignTable) || errors.As(err, &again) || strings.Contains(err.Error(), "run Migrate again") {
				t.Errorf("Migrate of a table that is not a jobqueue table = %v; want ErrForeignTable, no advice to run it again", err)
			}
		})
	})
}

// readOnlyURL is e's database URL for a connection that refuses writes:
// default_transaction_read_only on PostgreSQL, mode=ro on SQLite.
func readOnlyURL(t *testing.T, e *testdb.Env) string {
	t.Helper()
	if e.Kind == engine.SQLite {
		return e.URL + "?mode=ro"
	}
	u, err := url.Parse(e.URL)
	if err != nil {
		t.Fatal(err)
	}
	v := u.Query()
	v.Set("options", "-c default_transaction_read_only=on")
	u.RawQuery = strings.ReplaceAll(v.Encode(), "+", "%20") // pgx reads a '+' as itself
	return u.String()
}
