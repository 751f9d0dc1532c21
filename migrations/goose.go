package migrations

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/pressly/goose/v3"
	"modernc.org/sqlite"

	"github.com/jobqueue/jobqueue/internal/engine"
)

// GooseMigrations returns our migrations for table, for a service that
// runs its own migrations with goose and wants ours in its `goose up`:
//
//	ms, err := migrations.GooseMigrations(db, "jobs", migrations.RetryPolicy{}, 20260101000000)
//	p, err := goose.NewProvider(goose.DialectPostgres, db, serviceFS, goose.WithGoMigrations(ms...))
//	_, err = p.Up(ctx)
//
// version is the goose version the service gives our migration, chosen so
// that it does not collide with its own versions (and ordered where the
// service wants the table to appear). The single migration ensures the
// table: a missing table is created, a version 2 table gets Install's index
// repair, and an outdated one (version 1, or an interrupted migration) is
// converted to version 2 as Migrate does, storing policy with every job —
// so, as for Migrate, everything that uses a version 1 table must be
// stopped while that `goose up` runs. A zero policy means "none given":
// the migration then installs and repairs but refuses an outdated table
// (an error wrapping ErrOutdatedTable), so that no job gets a policy nobody
// chose. A failed conversion is a *RunAgainError whose Step is "goose up".
// The down migration does nothing: the table and its jobs are kept.
//
// db must be the database the provider runs on: its driver tells the
// engine, as for Install (ErrUnsupportedDatabase for others; WithEngine
// names it), and the table name is
// checked for it now (ErrInvalidTableName), before any SQL runs. On
// PostgreSQL and SQLite the migration runs in goose's transaction (with
// goose's version row); on MySQL, where DDL commits on its own, it runs
// without one (in one when db allows a single open connection, since goose
// holds one while the migration runs). On SQLite the conversion rebuilds
// the table inside goose's transaction, where foreign_keys cannot be
// turned off: while it is on, a version 1 table that other tables' foreign
// keys reference is refused, changing nothing (their ON DELETE actions
// would run); run that `goose up` with foreign_keys off, or use Migrate.
func GooseMigrations(db *sql.DB, table string, p RetryPolicy, version int64, opts ...Option) ([]*goose.Migration, error) {
	t, err := tableFor(db, table, opts)
	if err != nil {
		return nil, err
	}
	k := t.Kind
	if p != (RetryPolicy{}) {
		if err := p.internal().Validate(); err != nil {
			return nil, fmt.Errorf("GooseMigrations for table %s: %w; pass the policy version 2 should store with every job (for example MaxAttempts 3, BaseDelay 2m, MaxDelay 1h), or a zero RetryPolicy to install and repair only", t.Name, err)
		}
	}
	if version < 1 {
		return nil, fmt.Errorf("jobqueue goose migration: version %d; goose versions start at 1", version)
	}
	up := gooseFunc(db, k, func(ctx context.Context, ex execQueryer) error {
		return ensureTable(ctx, ex, t, func(ctx context.Context, ex execQueryer, st tableState) error {
			return gooseOutdated(ctx, ex, t, p, st)
		})
	})
	return []*goose.Migration{goose.NewGoMigration(version, up, nil)}, nil
}

// gooseOutdated is what GooseMigrations' migration does with a version 1
// or partly migrated table (st): ex is the migration's transaction on
// PostgreSQL and SQLite, and a pinned connection holding the table lock on
// MySQL; p is validated or zero (none given: the table is refused). On
// success the table must be version 2; its indexes are ensured afterwards.
func gooseOutdated(ctx context.Context, ex execQueryer, t engine.Table, p RetryPolicy, st tableState) error {
	if p == (RetryPolicy{}) {
		return fmt.Errorf("%w (GooseMigrations was given no retry policy, so goose up does not convert the table: pass the policy version 2 should store with every job)", outdatedError(t, st))
	}
	if err := convertV1(ctx, ex, t, p, migrateOptions{}); err != nil {
		return migrateAgain("goose up", t, err)
	}
	return nil
}

// gooseDialect is goose's dialect for engine k.
func gooseDialect(k engine.Kind) (goose.Dialect, error) {
	switch k {
	case engine.Postgres:
		return goose.DialectPostgres, nil
	case engine.MySQL:
		return goose.DialectMySQL, nil
	case engine.SQLite:
		return goose.DialectSQLite3, nil
	}
	return "", fmt.Errorf("%w: engine %q", engine.ErrUnsupportedDatabase, k)
}

// gooseFunc wraps fn as a goose GoFunc for engine k: RunTx on PostgreSQL
// and SQLite, whose DDL is transactional; RunDB on MySQL, whose DDL commits
// on its own — except when db allows a single open connection: goose keeps
// one connection while a RunDB migration runs on the pool, which would
// wait forever, so it is RunTx then (one session, DDL still commits).
func gooseFunc(db *sql.DB, k engine.Kind, fn func(context.Context, execQueryer) error) *goose.GoFunc {
	if k == engine.MySQL && db.Stats().MaxOpenConnections != 1 {
		return &goose.GoFunc{RunDB: func(ctx context.Context, db *sql.DB) error { return fn(ctx, db) }}
	}
	return &goose.GoFunc{RunTx: func(ctx context.Context, tx *sql.Tx) error { return fn(ctx, tx) }}
}

// runGoose runs fn once as a goose Go migration on db (engine k), through
// a goose Provider with versioning disabled (nothing is recorded, so it
// runs on every call; no goose version table is created) and without
// goose's global registry. fn gets the *sql.Tx on PostgreSQL and SQLite and
// the *sql.DB on MySQL (see gooseFunc). On SQLite a busy error (another
// writer held the database) rolls back and retries fn, up to 5 times.
// extra are more options of the provider (Migrate's on SQLite).
func runGoose(ctx context.Context, db *sql.DB, k engine.Kind, fn func(context.Context, execQueryer) error, extra ...goose.ProviderOption) error {
	dialect, err := gooseDialect(k)
	if err != nil {
		return err
	}
	m := goose.NewGoMigration(1, gooseFunc(db, k, fn), nil)
	opts := append([]goose.ProviderOption{
		goose.WithGoMigrations(m),
		goose.WithDisableVersioning(true),
		goose.WithDisableGlobalRegistry(true),
	}, extra...)
	p, err := goose.NewProvider(dialect, db, nil, opts...)
	if err != nil {
		return fmt.Errorf("goose provider: %w", err)
	}
	for try := 1; ; try++ {
		_, err = p.Up(ctx)
		if err == nil {
			return nil
		}
		var pe *goose.PartialError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		if k != engine.SQLite || !isBusy(err) || try == 5 {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(time.Duration(try*50) * time.Millisecond):
		}
	}
}

// isBusy reports SQLite's SQLITE_BUSY and SQLITE_LOCKED (and their
// extended codes).
func isBusy(err error) bool {
	var se *sqlite.Error
	if !errors.As(err, &se) {
		return false
	}
	code := se.Code() & 0xff
	return code == 5 || code == 6
}
