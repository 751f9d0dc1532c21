package migrations

// The v1 -> v2 migration: the flow common to every engine. Each engine's
// steps live in migrate_postgres.go, migrate_mysql.go and migrate_sqlite.go.

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/pressly/goose/v3"

	"github.com/jobqueue/jobqueue/internal/engine"
)

// Migrate converts a version 1 table (SPEC section 4) to version 2, once,
// with everything that uses the table stopped (producers, workers, cron):
//
//   - the version 2 columns and the 'expired' status are added, and policy is
//     stored with every job (version 1 kept none);
//   - attempts = retry_count, plus one for jobs that were in_progress or
//     completed; in_progress jobs are requeued at once (their attempt was
//     interrupted); then a pending job whose deadline has passed becomes
//     expired, else one whose attempts are used up becomes failed;
//   - finished_at is the scheduled_at of jobs already completed or failed,
//     and the migration time for jobs the migration fails or expires;
//   - error, ids, names, types, payloads, deadlines and creation times are
//     kept; retry_count and locked_at are dropped; the indexes end as in
//     SPEC section 2 and the version 1 ones are gone.
//
// On PostgreSQL and SQLite it runs in one transaction: if it fails, the
// version 1 table is left as it was. On MySQL/MariaDB every DDL statement
// commits on its own, so each step checks what is already done: a migration
// interrupted at any point completes when Migrate runs again with the same
// policy (another one is refused while rows are left to convert, naming
// the stored one; Install refuses the table in between). On MySQL created_at goes
// from TIMESTAMP to a UTC DATETIME keeping each instant, whatever the
// server's or session's time zone. On SQLite, which rebuilds the table,
// Migrate turns foreign_keys off on its connection for the migration and
// on again afterwards, as SQLite's procedure for a table rebuild says, so
// that the foreign keys of your tables that reference the jobs table run
// no ON DELETE action; before it commits, PRAGMA foreign_key_check must
// find no row of yours referencing a missing job.
//
// A missing table is installed (as Install does); a version 2 table is left
// as it is (Migrate then only checks its indexes, like Install). The policy
// and the table name are checked before any SQL runs (errors wrapping
// ErrInvalidPolicy and ErrInvalidTableName); a driver other than pgx,
// go-sql-driver/mysql or modernc.org/sqlite, or a wrapper of one of them
// such as otelsql, gives ErrUnsupportedDatabase (WithEngine names the
// engine under a wrapper that detection cannot see through).
// On MySQL the conversion runs on a second connection of db's pool while
// goose holds one, or, when the pool allows a single connection, on goose's
// own (each DDL statement still commits on its own).
//
// A migration that fails returns a *RunAgainError (Step "Migrate"): fix
// the cause it names, then run Migrate again with the same policy; not
// when the checks before any SQL refuse it, nor for a table that is not a
// jobqueue table (ErrForeignTable).
func Migrate(ctx context.Context, db *sql.DB, policy RetryPolicy, table string, opts ...Option) error {
	o, err := applyOptions(opts)
	if err != nil {
		return fmt.Errorf("migrate table %q: %w", table, err)
	}
	return migrate(ctx, db, policy, table, migrateOptions{kind: o.kind})
}

// migrateOptions are Migrate's options (kind) and knobs that only tests
// turn.
type migrateOptions struct {
	// kind is the engine named with WithEngine; "" detects it.
	kind engine.Kind
	// now is the migration time; time.Now when nil.
	now func() time.Time
	// afterStep, when set, runs after step n (1-based) of the conversion
	// has succeeded; an error it returns stops the migration there, as a
	// crash would (tests use it to interrupt the migration at each step).
	afterStep func(step int, name string) error
	// mysqlBatchIDs replaces the constant of the same name when positive;
	// afterBatch runs after each batch of MySQL's row conversion, and an
	// error stops the migration there.
	mysqlBatchIDs int
	afterBatch    func(batch int) error
	// sqliteForeignKeys, on SQLite, turns foreign_keys off on goose's
	// connection for the migration (set by sqliteGooseOptions); nil in a
	// service's own goose run.
	sqliteForeignKeys *sqliteForeignKeysOff
}

// migrate is Migrate with options.
func migrate(ctx context.Context, db *sql.DB, p RetryPolicy, table string, o migrateOptions) error {
	if err := p.internal().Validate(); err != nil {
		return fmt.Errorf("migrate table %q: %w; pass the policy version 2 should store with every job (for example MaxAttempts 3, BaseDelay 2m, MaxDelay 1h)", table, err)
	}
	k, err := engine.Choose(db, o.kind)
	if err != nil {
		return fmt.Errorf("migrate table %q: %w", table, err)
	}
	t, err := engine.ParseTable(k, table)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	var gooseOpts []goose.ProviderOption
	if k == engine.SQLite {
		gooseOpts = sqliteGooseOptions(&o)
	}
	err = runGoose(ctx, db, k, func(ctx context.Context, ex execQueryer) error {
		return ensureTable(ctx, ex, t, func(ctx context.Context, ex execQueryer, st tableState) error {
			return convertV1(ctx, ex, t, p, o)
		})
	}, gooseOpts...)
	if errors.Is(err, ErrForeignTable) && !errors.Is(err, ErrSideNameTaken) {
		// Not a jobqueue table: no run of Migrate on this name cures it.
		return fmt.Errorf("migrate table %s: %w", t.Name, err)
	}
	if err != nil {
		return migrateAgain("Migrate", t, err)
	}
	return nil
}

// migrateAgain is the error of a migration of t that failed with err:
// step (Migrate, or goose up) is to run again once its cause is fixed.
func migrateAgain(step string, t engine.Table, err error) *RunAgainError {
	e := &RunAgainError{Step: step, Table: t.Name, Err: err, what: "migrate table " + t.Name + " to version 2",
		left: "nothing was changed (one transaction)"}
	if t.Kind == engine.MySQL {
		e.left = "MySQL commits each step on its own, so the table may be partly migrated"
		e.then = " with the same policy to complete it"
	}
	return e
}

// migrateStep is one step of the conversion. On MySQL each step is safe to
// run again after an interruption: it looks at what is already done.
type migrateStep struct {
	name string
	run  func(ctx context.Context, ex execQueryer) error
}

// convertV1 converts the version 1 or partly migrated table t to version 2
// in place, through ex (a *sql.Tx on PostgreSQL and SQLite; a pinned
// *sql.Conn, a *sql.Tx or a *sql.DB on MySQL). p must be valid.
func convertV1(ctx context.Context, ex execQueryer, t engine.Table, p RetryPolicy, o migrateOptions) (err error) {
	now := time.Now()
	if o.now != nil {
		now = o.now()
	}
	now = now.UTC().Truncate(time.Microsecond)
	if t.Kind == engine.MySQL {
		// DATETIME keeps whole seconds; TimeArg sends them truncated.
		now = now.Truncate(time.Second)
	}
	c := &converter{t: t, p: p, now: now, o: o}

	var steps []migrateStep
	switch t.Kind {
	case engine.Postgres:
		steps = c.postgresSteps()
	case engine.MySQL:
		var release func() error
		if ex, release, err = mysqlSession(ctx, ex); err != nil {
			return err
		}
		defer func() { err = errors.Join(err, release()) }()
		steps = c.mysqlSteps()
	case engine.SQLite:
		steps = c.sqliteSteps()
	default:
		return fmt.Errorf("%w: engine %q", engine.ErrUnsupportedDatabase, t.Kind)
	}
	for i, s := range steps {
		if err := s.run(ctx, ex); err != nil {
			return fmt.Errorf("step %d (%s): %w", i+1, s.name, err)
		}
		if o.afterStep != nil {
			if err := o.afterStep(i+1, s.name); err != nil {
				return fmt.Errorf("after step %d (%s): %w", i+1, s.name, err)
			}
		}
	}
	return nil
}

// converter builds and runs the conversion's SQL for one table.
type converter struct {
	t   engine.Table
	p   RetryPolicy
	now time.Time
	o   migrateOptions
}

// v2Column is a version 2 column as the migration adds it on PostgreSQL and
// MySQL: nullable at first (a NULL attempts marks a row not yet converted),
// made NOT NULL once every row is converted.
type v2Column struct {
	name, after string
	// pgType and myType are the types while migrating (nullable).
	pgType, myType string
	// pgFinal are PostgreSQL ALTER COLUMN actions of the end; myFinal is
	// the MySQL definition of the end ("" when nothing changes).
	pgFinal []string
	myFinal string
}

var migratedColumns = []v2Column{
	{name: "attempts", after: "status", pgType: "INT", myType: "INT UNSIGNED NULL",
		pgFinal: []string{"SET DEFAULT 0", "SET NOT NULL"}, myFinal: "INT UNSIGNED NOT NULL DEFAULT 0"},
	{name: "claim_token", after: "attempts", pgType: "VARCHAR(64)", myType: "VARCHAR(64) COLLATE utf8mb4_bin NULL"},
	{name: "lease_until", after: "claim_token", pgType: "TIMESTAMP", myType: "DATETIME NULL"},
	{name: "max_attempts", after: "lease_until", pgType: "INT", myType: "INT UNSIGNED NULL",
		pgFinal: []string{"SET NOT NULL"}, myFinal: "INT UNSIGNED NOT NULL"},
	{name: "base_delay", after: "max_attempts", pgType: "INT", myType: "INT UNSIGNED NULL",
		pgFinal: []string{"SET NOT NULL"}, myFinal: "INT UNSIGNED NOT NULL"},
	{name: "max_delay", after: "base_delay", pgType: "INT", myType: "INT UNSIGNED NULL",
		pgFinal: []string{"SET NOT NULL"}, myFinal: "INT UNSIGNED NOT NULL"},
	{name: "finished_at", after: "expires_at", pgType: "TIMESTAMP", myType: "DATETIME NULL"},
}

// sqlArgs collects the arguments of one statement and names their
// placeholders ($n on PostgreSQL, ? elsewhere).
type sqlArgs struct {
	k    engine.Kind
	args []any
}

func (a *sqlArgs) add(v any) string {
	a.args = append(a.args, v)
	if a.k == engine.Postgres {
		return "$" + strconv.Itoa(len(a.args))
	}
	return "?"
}

// conversion returns the SQL expression of every version 2 column computed
// from a version 1 row (SPEC section 4). The expressions only read version
// 1 columns, so they serve both as an UPDATE's SET list (where MySQL
// evaluates assignments left to right with the new values: the order of
// conversionOrder keeps every read before its column is assigned) and as
// the SELECT list of SQLite's copy. timeCol maps a stored time column to
// the expression that reads it (SQLite normalizes them).
func (c *converter) conversion(a *sqlArgs, timeCol func(string) string) map[string]string {
	now := func() string { return a.add(c.t.Kind.TimeArg(c.now)) }
	maxAttempts, baseDelay, maxDelay := c.p.internal().Seconds()
	started := "(retry_count + CASE WHEN status IN ('in_progress', 'completed') THEN 1 ELSE 0 END)"
	deadlinePassed := func() string {
		return "(" + timeCol("expires_at") + " IS NOT NULL AND " + timeCol("expires_at") + " <= " + now() + ")"
	}
	maxA := strconv.FormatInt(maxAttempts, 10)
	return map[string]string{
		"attempts":     started,
		"claim_token":  "NULL",
		"lease_until":  "NULL",
		"max_attempts": maxA,
		"base_delay":   strconv.FormatInt(baseDelay, 10),
		"max_delay":    strconv.FormatInt(maxDelay, 10),
		"finished_at": "CASE WHEN status IN ('completed', 'failed') THEN " + timeCol("scheduled_at") +
			" WHEN status IN ('pending', 'in_progress') AND (" + deadlinePassed() + " OR " + started + " >= " + maxA + ") THEN " + now() +
			" ELSE NULL END",
		"scheduled_at": "CASE WHEN status = 'in_progress' THEN " + now() + " ELSE " + timeCol("scheduled_at") + " END",
		"status": "CASE WHEN status IN ('pending', 'in_progress') THEN" +
			" CASE WHEN " + deadlinePassed() + " THEN 'expired' WHEN " + started + " >= " + maxA + " THEN 'failed' ELSE 'pending' END" +
			" ELSE status END",
	}
}

// conversionOrder is the order of the assignments (see conversion).
var conversionOrder = []string{"attempts", "claim_token", "lease_until", "max_attempts", "base_delay", "max_delay", "finished_at", "scheduled_at", "status"}

// rowConversion (PostgreSQL, MySQL) is the UPDATE that converts every row
// not yet converted (its attempts is NULL) in place, with its arguments; ok
// is false when the rows were converted earlier (retry_count is dropped only
// after).
func (c *converter) rowConversion(ctx context.Context, ex execQueryer) (q string, args []any, ok bool, err error) {
	cols, err := columns(ctx, ex, c.t)
	if err != nil {
		return "", nil, false, err
	}
	if _, ok := cols["retry_count"]; !ok {
		return "", nil, false, nil
	}
	a := &sqlArgs{k: c.t.Kind}
	conv := c.conversion(a, func(col string) string { return col })
	set := make([]string, 0, len(conversionOrder))
	for _, col := range conversionOrder {
		set = append(set, col+" = "+conv[col])
	}
	return "UPDATE " + c.t.Quoted() + " SET " + strings.Join(set, ", ") + " WHERE attempts IS NULL", a.args, true, nil
}

// replaceIndexes (PostgreSQL, MySQL) drops the version 1 indexes on (type)
// and (locked_at) and lets ensureIndexes create the four version 2 ones,
// rebuilding status_scheduled with the id tiebreaker.
func (c *converter) replaceIndexes(ctx context.Context, ex execQueryer) error {
	idx, err := indexes(ctx, ex, c.t)
	if err != nil {
		return err
	}
	for _, suffix := range []string{"type", "locked_at"} {
		name := c.t.IndexName(suffix)
		if _, ok := idx[indexKey(c.t, name)]; !ok {
			continue
		}
		q := `DROP INDEX "` + name + `"`
		if c.t.Kind == engine.MySQL {
			q = "DROP INDEX `" + name + "` ON " + c.t.Quoted()
		}
		if _, err := ex.ExecContext(ctx, q); err != nil {
			return err
		}
	}
	return ensureIndexes(ctx, ex, c.t)
}

// finish (PostgreSQL, MySQL) makes the new columns NOT NULL and drops
// retry_count and locked_at, in one ALTER TABLE: the table is version 2
// once it has run. final gives the engine's clauses that make one column
// final (none when it already is).
func (c *converter) finish(ctx context.Context, ex execQueryer, final func(col v2Column, ci columnInfo) []string) error {
	cols, err := columns(ctx, ex, c.t)
	if err != nil {
		return err
	}
	var clauses []string
	for _, col := range migratedColumns {
		ci, ok := cols[col.name]
		if !ok {
			return fmt.Errorf("column %s is missing", col.name)
		}
		clauses = append(clauses, final(col, ci)...)
	}
	for _, name := range v1OnlyColumns {
		if _, ok := cols[name]; ok {
			clauses = append(clauses, "DROP COLUMN "+name)
		}
	}
	return c.alter(ctx, ex, clauses)
}

// alter runs one ALTER TABLE with the clauses, if there are any.
func (c *converter) alter(ctx context.Context, ex execQueryer, clauses []string) error {
	if len(clauses) == 0 {
		return nil
	}
	_, err := ex.ExecContext(ctx, "ALTER TABLE "+c.t.Quoted()+" "+strings.Join(clauses, ", "))
	return err
}
