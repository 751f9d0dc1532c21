package migrations_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pressly/goose/v3"
	_ "modernc.org/sqlite" // the driver the example opens

	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/testdb"
	"github.com/jobqueue/jobqueue/migrations"
)

// A service that migrates its database with goose includes the jobs table
// in its own `goose up`: it adds our migration, under a version of its
// choosing, to its provider next to its own migrations.
func ExampleGooseMigrations() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "jobqueue-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	db, err := sql.Open("sqlite", filepath.Join(dir, "service.db"))
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()

	// The service's own migration (often SQL files in an embed.FS instead).
	users := goose.NewGoMigration(1, &goose.GoFunc{RunTx: func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `CREATE TABLE users (id INTEGER PRIMARY KEY, email TEXT NOT NULL)`)
		return err
	}}, nil)
	// Ours, as version 2 of the service's sequence.
	jobs, err := migrations.GooseMigrations(db, "jobs", migrations.RetryPolicy{}, 2)
	if err != nil {
		log.Fatal(err)
	}
	p, err := goose.NewProvider(goose.DialectSQLite3, db, nil,
		goose.WithGoMigrations(append([]*goose.Migration{users}, jobs...)...))
	if err != nil {
		log.Fatal(err)
	}
	results, err := p.Up(ctx)
	if err != nil {
		log.Fatal(err)
	}
	for _, r := range results {
		fmt.Println("applied version", r.Source.Version)
	}
	// The next deploy's `goose up` has nothing to do.
	results, err = p.Up(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("second up applied", len(results))
	// Output:
	// applied version 1
	// applied version 2
	// second up applied 0
}

func TestGooseMigrationsInAServiceProvider(t *testing.T) {
	t.Parallel()
	testdb.ForEachEngine(t, func(t *testing.T, e *testdb.Env) {
		ctx := context.Background()
		k, db := e.Kind, e.DB
		jobs, users, versions := e.Table(t), e.Table(t), e.Table(t)
		jt, err := engine.ParseTable(k, jobs)
		if err != nil {
			t.Fatal(err)
		}
		ut, err := engine.ParseTable(k, users)
		if err != nil {
			t.Fatal(err)
		}
		dialect := map[engine.Kind]goose.Dialect{engine.Postgres: goose.DialectPostgres, engine.MySQL: goose.DialectMySQL, engine.SQLite: goose.DialectSQLite3}[k]

		newProvider := func() *goose.Provider {
			t.Helper()
			own := goose.NewGoMigration(1, &goose.GoFunc{RunTx: func(ctx context.Context, tx *sql.Tx) error {
				_, err := tx.ExecContext(ctx, `CREATE TABLE `+ut.Quoted()+` (id INTEGER PRIMARY KEY, email VARCHAR(255) NOT NULL)`)
				return err
			}}, nil)
			ours, err := migrations.GooseMigrations(db, jobs, migrations.RetryPolicy{}, 20260101000000)
			if err != nil {
				t.Fatal(err)
			}
			p, err := goose.NewProvider(dialect, db, nil,
				goose.WithGoMigrations(append([]*goose.Migration{own}, ours...)...),
				goose.WithTableName(versions), // a version table of this test's own
				goose.WithDisableGlobalRegistry(true))
			if err != nil {
				t.Fatal(err)
			}
			return p
		}

		results, err := newProvider().Up(ctx)
		if err != nil {
			t.Fatalf("goose up: %v", err)
		}
		var applied []int64
		for _, r := range results {
			applied = append(applied, r.Source.Version)
		}
		if fmt.Sprint(applied) != "[1 20260101000000]" {
			t.Errorf("applied %v, want [1 20260101000000]", applied)
		}
		// The jobs table is a working version 2 table: a job goes in
		// with the columns of SPEC section 2, and Install finds nothing
		// to change.
		if _, err := db.ExecContext(ctx, `INSERT INTO `+jt.Quoted()+` (name, payload, max_attempts, base_delay, max_delay, scheduled_at, created_at)
VALUES ('send', '{}', 3, 60, 3600, '2026-01-02 03:04:05', '2026-01-01 00:00:00')`); err != nil {
			t.Fatalf("insert a job: %v", err)
		}
		var status string
		var attempts int
		if err := db.QueryRowContext(ctx, `SELECT status, attempts FROM `+jt.Quoted()).Scan(&status, &attempts); err != nil {
			t.Fatal(err)
		}
		if status != "pending" || attempts != 0 {
			t.Errorf("new job: status %q attempts %d, want pending 0", status, attempts)
		}
		if err := migrations.Install(ctx, db, jobs); err != nil {
			t.Fatalf("Install after goose up: %v", err)
		}
		var n int
		if err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM `+ut.Quoted()).Scan(&n); err != nil {
			t.Fatalf("the service's own table: %v", err)
		}

		// The next deploy: nothing pending, nothing applied.
		p := newProvider()
		if v, err := p.GetDBVersion(ctx); err != nil || v != 20260101000000 {
			t.Errorf("version = %d, %v; want 20260101000000", v, err)
		}
		results, err = p.Up(ctx)
		if err != nil || len(results) != 0 {
			t.Errorf("second goose up: %d applied, %v; want none", len(results), err)
		}
	})
}

func TestGooseMigrationsRejectsBadInput(t *testing.T) {
	t.Parallel()
	db, err := sql.Open("sqlite", filepath.Join(t.TempDir(), "x.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	cases := []struct {
		name    string
		table   string
		policy  migrations.RetryPolicy
		version int64
		want    error
		// says is in the error: a bad policy's said only "invalid
		// retry policy: …", naming neither the call, the table nor
		// what to pass.
		says []string
	}{
		{"bad table name", "a-b", migrations.RetryPolicy{}, 1, migrations.ErrInvalidTableName, nil},
		{"bad policy", "jobs", migrations.RetryPolicy{MaxAttempts: -1, BaseDelay: 1, MaxDelay: 1}, 1, migrations.ErrInvalidPolicy, []string{"GooseMigrations", "jobs", "zero RetryPolicy"}},
		{"policy given in part", "jobs", migrations.RetryPolicy{MaxAttempts: 3}, 1, migrations.ErrInvalidPolicy, []string{"GooseMigrations", "jobs", "BaseDelay", "zero RetryPolicy"}},
		{"base delay too long for the column", "jobs", migrations.RetryPolicy{MaxAttempts: 3, BaseDelay: 3_000_000_000 * time.Second, MaxDelay: time.Hour}, 1, migrations.ErrInvalidPolicy, []string{"GooseMigrations", "jobs"}},
		{"version 0", "jobs", migrations.RetryPolicy{}, 0, nil, []string{"goose versions start at 1"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ms, err := migrations.GooseMigrations(db, c.table, c.policy, c.version)
			if err == nil || ms != nil || (c.want != nil && !errors.Is(err, c.want)) {
				t.Fatalf("GooseMigrations = %v, %v; want an error wrapping %v", ms, err, c.want)
			}
			for _, s := range c.says {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("GooseMigrations error %q does not say %q", err, s)
				}
			}
		})
	}
	// Nothing was created.
	var n int
	if err := db.QueryRow(`SELECT COUNT(*) FROM sqlite_master`).Scan(&n); err != nil || n != 0 {
		t.Errorf("sqlite_master has %d entries (%v); want none", n, err)
	}
}
