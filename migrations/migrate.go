package migrations

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jobqueue/jobqueue/internal/ddl"
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
// policy (Install refuses the table in between). On MySQL created_at goes
// from TIMESTAMP to a UTC DATETIME keeping each instant, whatever the
// server's or session's time zone.
//
// A missing table is installed (as Install does); a version 2 table is left
// as it is (Migrate then only checks its indexes, like Install). The policy
// and the table name are checked before any SQL runs (errors wrapping
// ErrInvalidPolicy and ErrInvalidTableName); a driver other than pgx,
// go-sql-driver/mysql or modernc.org/sqlite gives ErrUnsupportedDatabase.
// On MySQL the conversion runs on a second connection of db's pool while
// goose holds one, or, when the pool allows a single connection, on goose's
// own (each DDL statement still commits on its own).
func Migrate(ctx context.Context, db *sql.DB, policy RetryPolicy, table string) error {
	return migrate(ctx, db, policy, table, migrateOptions{})
}

// migrateOptions are knobs that only tests turn.
type migrateOptions struct {
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
}

// migrate is Migrate with options.
func migrate(ctx context.Context, db *sql.DB, p RetryPolicy, table string, o migrateOptions) error {
	if err := p.Validate(); err != nil {
		return fmt.Errorf("migrate table %q: %w; pass the policy version 2 should store with every job (for example MaxAttempts 3, BaseDelay 2m, MaxDelay 1h)", table, err)
	}
	k, err := engine.Detect(db)
	if err != nil {
		return fmt.Errorf("migrate table %q: %w", table, err)
	}
	t, err := engine.ParseTable(k, table)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	err = runGoose(ctx, db, k, func(ctx context.Context, ex execQueryer) error {
		return ensureTable(ctx, ex, t, func(ctx context.Context, ex execQueryer, st tableState) error {
			return convertV1(ctx, ex, t, p, o)
		})
	})
	if err != nil {
		next := "nothing was changed (one transaction); fix the cause and run Migrate again"
		if k == engine.MySQL {
			next = "MySQL commits each step on its own, so the table may be partly migrated; fix the cause and run Migrate again with the same policy to complete it"
		}
		return fmt.Errorf("migrate table %s to version 2: %w (%s)", t.Name, err, next)
	}
	return nil
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
func convertV1(ctx context.Context, ex execQueryer, t engine.Table, p RetryPolicy, o migrateOptions) error {
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

	if t.Kind == engine.MySQL {
		// One session for the whole conversion: its time zone must be UTC
		// while created_at turns from TIMESTAMP into DATETIME.
		var release func()
		var err error
		if ex, release, err = oneSession(ctx, t.Kind, ex); err != nil {
			return err
		}
		defer release()
		restore, err := mysqlUTCSession(ctx, ex)
		if err != nil {
			return err
		}
		defer restore()
	}

	var steps []migrateStep
	switch t.Kind {
	case engine.Postgres, engine.MySQL:
		steps = []migrateStep{
			{"add the version 2 columns", c.addColumns},
			{"convert the rows", c.convertRows},
			{"replace the version 1 indexes", c.replaceIndexes},
			{"drop retry_count and locked_at", c.finish},
		}
	case engine.SQLite:
		steps = []migrateStep{
			{"check the times", c.sqliteCheckTimes},
			{"create the version 2 table", c.sqliteCreate},
			{"copy and convert the rows", c.sqliteCopy},
			{"replace the version 1 table", c.sqliteSwap},
			{"create the indexes", func(ctx context.Context, ex execQueryer) error { return ensureIndexes(ctx, ex, t) }},
		}
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

// mysqlUTCSession sets the session time zone of ex's connection to UTC and
// returns a func that restores the previous one.
func mysqlUTCSession(ctx context.Context, ex execQueryer) (restore func(), err error) {
	var prev string
	rows, err := ex.QueryContext(ctx, "SELECT @@session.time_zone")
	if err != nil {
		return nil, fmt.Errorf("read the session time zone: %w", err)
	}
	for rows.Next() {
		if err := rows.Scan(&prev); err != nil {
			rows.Close()
			return nil, fmt.Errorf("read the session time zone: %w", err)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read the session time zone: %w", err)
	}
	if _, err := ex.ExecContext(ctx, "SET time_zone = '+00:00'"); err != nil {
		return nil, fmt.Errorf("set the session time zone to UTC: %w", err)
	}
	return func() {
		// Best effort: the connection goes back to the pool afterwards.
		ex.ExecContext(context.WithoutCancel(ctx), "SET time_zone = ?", prev)
	}, nil
}

// converter builds and runs the conversion's SQL for one table.
type converter struct {
	t   engine.Table
	p   RetryPolicy
	now time.Time
	o   migrateOptions
}

// v2Column is a version 2 column as the migration adds it: nullable at
// first (a NULL attempts marks a row not yet converted), made NOT NULL once
// every row is converted.
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

// mysqlStatus is the version 2 status column on MySQL.
const mysqlStatus = "ENUM('pending','in_progress','completed','failed','expired') COLLATE utf8mb4_bin NOT NULL DEFAULT 'pending'"

// mysqlKept are the MySQL definitions of the columns both versions share
// whose type or collation version 2 may define differently from a version 1
// table (TIMESTAMP times, a case-insensitive collation).
var mysqlKept = []struct{ name, def string }{
	{"name", "VARCHAR(255) COLLATE utf8mb4_bin NOT NULL"},
	{"type", "VARCHAR(64) COLLATE utf8mb4_bin NOT NULL DEFAULT 'default'"},
	{"error", "TEXT COLLATE utf8mb4_bin NULL"},
	{"scheduled_at", "DATETIME NOT NULL"},
	{"expires_at", "DATETIME NULL"},
	{"created_at", "DATETIME NOT NULL"},
}

// addColumns (PostgreSQL, MySQL) adds the missing version 2 columns as
// nullable columns. On MySQL it also adds the 'expired' status, turns
// TIMESTAMP times into UTC DATETIMEs (the session is UTC, so each instant is
// kept) and gives the string columns version 2's binary collation, all in
// one ALTER TABLE that does only what is still to do.
func (c *converter) addColumns(ctx context.Context, ex execQueryer) error {
	cols, err := columns(ctx, ex, c.t)
	if err != nil {
		return err
	}
	var clauses []string
	if c.t.Kind == engine.MySQL {
		if st := cols["status"]; !strings.Contains(st.Type, "'expired'") || (st.Collation != "" && st.Collation != "utf8mb4_bin") {
			clauses = append(clauses, "MODIFY COLUMN status "+mysqlStatus)
		}
		for _, k := range mysqlKept {
			ci, ok := cols[k.name]
			if !ok {
				continue
			}
			isTime := strings.HasSuffix(k.name, "_at")
			if (isTime && ci.Type == "timestamp") || (!isTime && ci.Collation != "" && ci.Collation != "utf8mb4_bin") {
				clauses = append(clauses, "MODIFY COLUMN "+k.name+" "+k.def)
			}
		}
	}
	for _, col := range migratedColumns {
		if _, ok := cols[col.name]; ok {
			continue
		}
		if c.t.Kind == engine.MySQL {
			clauses = append(clauses, "ADD COLUMN "+col.name+" "+col.myType+" AFTER "+col.after)
		} else {
			clauses = append(clauses, "ADD COLUMN IF NOT EXISTS "+col.name+" "+col.pgType)
		}
	}
	if c.t.Kind == engine.MySQL {
		// New string columns (and later ones) get the binary collation.
		clauses = append(clauses, "DEFAULT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin")
		if len(clauses) == 1 {
			clauses = nil
		}
	} else {
		// Version 2 gives no default to the times; a version 1 table may
		// have had NOW().
		for _, name := range []string{"scheduled_at", "created_at"} {
			if cols[name].Default != "" {
				clauses = append(clauses, "ALTER COLUMN "+name+" DROP DEFAULT")
			}
		}
		// A CHECK on status listing the version 1 statuses would refuse
		// 'expired'; version 2 has none.
		checks, err := c.pgStatusChecks(ctx, ex)
		if err != nil {
			return err
		}
		for _, name := range checks {
			clauses = append(clauses, `DROP CONSTRAINT "`+strings.ReplaceAll(name, `"`, `""`)+`"`)
		}
	}
	if len(clauses) == 0 {
		return nil
	}
	_, err = ex.ExecContext(ctx, "ALTER TABLE "+c.t.Quoted()+" "+strings.Join(clauses, ", "))
	return err
}

// pgStatusChecks names the CHECK constraints of the PostgreSQL table that
// mention status but not 'expired'.
func (c *converter) pgStatusChecks(ctx context.Context, ex execQueryer) ([]string, error) {
	rows, err := ex.QueryContext(ctx, `SELECT con.conname FROM pg_constraint con
JOIN pg_class cl ON cl.oid = con.conrelid
JOIN pg_namespace n ON n.oid = cl.relnamespace
WHERE n.nspname = current_schema() AND cl.relname = $1 AND con.contype = 'c'
  AND pg_get_constraintdef(con.oid) LIKE '%status%' AND pg_get_constraintdef(con.oid) NOT LIKE '%expired%'
ORDER BY con.conname`, c.t.Name)
	if err != nil {
		return nil, fmt.Errorf("read the CHECK constraints of table %s: %w", c.t.Name, err)
	}
	defer rows.Close()
	var names []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			return nil, err
		}
		names = append(names, n)
	}
	return names, rows.Err()
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
	maxAttempts, baseDelay, maxDelay := c.p.Seconds()
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

// mysqlBatchIDs is how many ids one UPDATE of the MySQL conversion covers.
const mysqlBatchIDs = 50_000

// convertRows (PostgreSQL, MySQL) converts every row not yet converted (its
// attempts is NULL). On PostgreSQL that is one UPDATE in the migration's
// transaction. On MySQL it is one UPDATE per range of mysqlBatchIDs ids,
// each committing as a whole, so that a large table never needs one huge
// transaction; run again after an interruption, it converts only the rows
// still NULL.
func (c *converter) convertRows(ctx context.Context, ex execQueryer) error {
	cols, err := columns(ctx, ex, c.t)
	if err != nil {
		return err
	}
	if _, ok := cols["retry_count"]; !ok {
		return nil // converted earlier: retry_count is dropped only after
	}
	a := &sqlArgs{k: c.t.Kind}
	conv := c.conversion(a, func(col string) string { return col })
	set := make([]string, 0, len(conversionOrder))
	for _, col := range conversionOrder {
		set = append(set, col+" = "+conv[col])
	}
	q := "UPDATE " + c.t.Quoted() + " SET " + strings.Join(set, ", ") + " WHERE attempts IS NULL"
	if c.t.Kind != engine.MySQL {
		_, err = ex.ExecContext(ctx, q, a.args...)
		return err
	}
	batch := int64(mysqlBatchIDs)
	if c.o.mysqlBatchIDs > 0 {
		batch = int64(c.o.mysqlBatchIDs)
	}
	q += " AND id >= ? AND id < ?"
	// Each batch starts at the first row still to convert, so that a gap
	// in the ids (old jobs kept, millions since pruned) costs no empty
	// batches: there are at most as many batches as rows.
	for n, from := 1, int64(0); ; n++ {
		next, ok, err := c.mysqlFirstUnconverted(ctx, ex, from)
		if err != nil || !ok {
			return err // nil when every row is converted
		}
		from = next + batch
		if _, err := ex.ExecContext(ctx, q, append(a.args, next, from)...); err != nil {
			return err
		}
		if c.o.afterBatch != nil {
			if err := c.o.afterBatch(n); err != nil {
				return fmt.Errorf("after batch %d: %w", n, err)
			}
		}
	}
}

// mysqlFirstUnconverted is the smallest id at or above from of a row not
// yet converted (its attempts is NULL); ok is false when there is none.
func (c *converter) mysqlFirstUnconverted(ctx context.Context, ex execQueryer, from int64) (id int64, ok bool, err error) {
	var first sql.NullInt64
	rows, err := ex.QueryContext(ctx, "SELECT MIN(id) FROM "+c.t.Quoted()+" WHERE attempts IS NULL AND id >= ?", from)
	if err != nil {
		return 0, false, err
	}
	for rows.Next() {
		err = rows.Scan(&first)
	}
	if cerr := rows.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = rows.Err()
	}
	return first.Int64, first.Valid, err
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
		if _, ok := idx[name]; !ok {
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
// once it has run.
func (c *converter) finish(ctx context.Context, ex execQueryer) error {
	cols, err := columns(ctx, ex, c.t)
	if err != nil {
		return err
	}
	var clauses []string
	for _, col := range migratedColumns {
		ci, ok := cols[col.name]
		if !ok {
			return fmt.Errorf("column %s is missing; run Migrate again", col.name)
		}
		if c.t.Kind == engine.MySQL {
			if col.myFinal != "" && ci.Nullable {
				clauses = append(clauses, "MODIFY COLUMN "+col.name+" "+col.myFinal)
			}
			continue
		}
		if len(col.pgFinal) > 0 && ci.Nullable {
			for _, action := range col.pgFinal {
				clauses = append(clauses, "ALTER COLUMN "+col.name+" "+action)
			}
		}
	}
	for _, name := range v1OnlyColumns {
		if _, ok := cols[name]; ok {
			clauses = append(clauses, "DROP COLUMN "+name)
		}
	}
	if len(clauses) == 0 {
		return nil
	}
	_, err = ex.ExecContext(ctx, "ALTER TABLE "+c.t.Quoted()+" "+strings.Join(clauses, ", "))
	return err
}

// SQLite keeps times as text, which the queue compares as text: every time
// is written in the fixed-width UTC form engine.SQLiteTimeFormat. A version
// 1 time may be 'YYYY-MM-DD HH:MM:SS' (CURRENT_TIMESTAMP), have a 'T', a
// fraction, an offset or 'Z', or be a number of Unix seconds; the copy
// rewrites each one to that form (to the millisecond, SQLite's %f, unless it
// already had the form).
const sqliteFixedTimeGlob = "[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9] [0-9][0-9]:[0-9][0-9]:[0-9][0-9].[0-9][0-9][0-9][0-9][0-9][0-9]"

// sqliteTime is the expression that reads the SQLite time column col in
// the fixed-width form (NULL when col is NULL or not a time).
func sqliteTime(col string) string {
	return "(CASE WHEN " + col + " IS NULL THEN NULL" +
		" WHEN typeof(" + col + ") IN ('integer', 'real') THEN strftime('%Y-%m-%d %H:%M:%f', " + col + ", 'unixepoch') || '000'" +
		" WHEN " + col + " GLOB '" + sqliteFixedTimeGlob + "' THEN " + col +
		" ELSE strftime('%Y-%m-%d %H:%M:%f', " + col + ") || '000' END)"
}

// sqliteTimeColumns are the time columns of a version 1 table.
var sqliteTimeColumns = []string{"scheduled_at", "expires_at", "created_at"}

// sqliteCheckTimes refuses a table holding a time SQLite cannot read, before
// anything is written: the copy would lose it.
func (c *converter) sqliteCheckTimes(ctx context.Context, ex execQueryer) error {
	cols, err := columns(ctx, ex, c.t)
	if err != nil {
		return err
	}
	for _, name := range v1OnlyColumns {
		if _, ok := cols[name]; !ok {
			return fmt.Errorf("column %s is missing, but SQLite migrates in one transaction and cannot have left the table like this; restore the version 1 table from your backup", name)
		}
	}
	for _, col := range sqliteTimeColumns {
		q := "SELECT id, CAST(" + col + " AS TEXT) FROM " + c.t.Quoted() +
			" WHERE " + col + " IS NOT NULL AND " + sqliteTime(col) + " IS NULL LIMIT 1"
		rows, err := ex.QueryContext(ctx, q)
		if err != nil {
			return err
		}
		var id int64
		var v string
		found := rows.Next()
		if found {
			err = rows.Scan(&id, &v)
		}
		rows.Close()
		if err != nil {
			return err
		}
		if found {
			return fmt.Errorf("job %d has %s = %q, which SQLite cannot read as a time; correct it (for example to 'YYYY-MM-DD HH:MM:SS' in UTC) and run Migrate again", id, col, v)
		}
	}
	return nil
}

// sqliteTemp is the name of the table SQLite's rebuild fills.
func (c *converter) sqliteTemp() engine.Table {
	return engine.Table{Kind: c.t.Kind, Name: c.t.Name + "__jobqueue_v2"}
}

// sqliteExtraColumns are the columns of the version 1 table that neither
// version defines (a user's own), with their declarations.
func (c *converter) sqliteExtraColumns(ctx context.Context, ex execQueryer) ([]columnInfo, error) {
	rows, err := ex.QueryContext(ctx, `SELECT name, type, "notnull", COALESCE(dflt_value, '') FROM pragma_table_info(?) ORDER BY cid`, c.t.Name)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	known := map[string]bool{}
	for _, list := range [][]string{v1OnlyColumns, v2OnlyColumns, commonColumns} {
		for _, n := range list {
			known[n] = true
		}
	}
	var extra []columnInfo
	for rows.Next() {
		var ci columnInfo
		var notNull bool
		if err := rows.Scan(&ci.Name, &ci.Type, &notNull, &ci.Default); err != nil {
			return nil, err
		}
		ci.Nullable = !notNull
		if !known[strings.ToLower(ci.Name)] {
			extra = append(extra, ci)
		}
	}
	return extra, rows.Err()
}

// sqliteCreate creates the version 2 table under a temporary name, with the
// user's extra columns at the end (their type, default and NOT NULL when it
// has a default; other constraints on them are not carried over).
func (c *converter) sqliteCreate(ctx context.Context, ex execQueryer) error {
	tmp := c.sqliteTemp()
	st, err := inspect(ctx, ex, tmp)
	if err != nil {
		return err
	}
	if st != tableMissing {
		return fmt.Errorf("table %s exists; Migrate rebuilds %s under that name: rename or drop it and run Migrate again", tmp.Name, c.t.Name)
	}
	if _, err := ex.ExecContext(ctx, ddl.CreateTable(tmp, false)); err != nil {
		return err
	}
	extra, err := c.sqliteExtraColumns(ctx, ex)
	if err != nil {
		return err
	}
	for _, col := range extra {
		def := quoteSQLite(col.Name) + " " + col.Type
		if col.Default != "" {
			if !col.Nullable {
				def += " NOT NULL"
			}
			def += " DEFAULT " + col.Default
		}
		if _, err := ex.ExecContext(ctx, "ALTER TABLE "+tmp.Quoted()+" ADD COLUMN "+def); err != nil {
			return fmt.Errorf("copy your column %s: %w", col.Name, err)
		}
	}
	return nil
}

// sqliteCopy fills the new table from the version 1 one in one INSERT …
// SELECT that converts every row.
func (c *converter) sqliteCopy(ctx context.Context, ex execQueryer) error {
	extra, err := c.sqliteExtraColumns(ctx, ex)
	if err != nil {
		return err
	}
	a := &sqlArgs{k: c.t.Kind}
	conv := c.conversion(a, sqliteTime)
	conv["expires_at"] = sqliteTime("expires_at")
	conv["created_at"] = sqliteTime("created_at")
	names := []string{"id", "name", "type", "payload", "error"}
	exprs := []string{"id", "name", "type", "payload", "error"}
	for _, col := range append(conversionOrder, "expires_at", "created_at") {
		names = append(names, col)
		exprs = append(exprs, conv[col])
	}
	for _, col := range extra {
		names = append(names, quoteSQLite(col.Name))
		exprs = append(exprs, quoteSQLite(col.Name))
	}
	q := "INSERT INTO " + c.sqliteTemp().Quoted() + " (" + strings.Join(names, ", ") + ") SELECT " +
		strings.Join(exprs, ", ") + " FROM " + c.t.Quoted() + " ORDER BY id"
	_, err = ex.ExecContext(ctx, q, a.args...)
	return err
}

// sqliteSwap drops the version 1 table, gives the new one its name, keeps
// the AUTOINCREMENT counter (ids are never reused) and recreates the user's
// own indexes (those on the columns that remain), and the triggers and
// views that name the table (SQLite's rename refuses to run while a view
// names a missing table, so they are dropped first, as SQLite's guide to
// table rebuilds does). One that uses retry_count or locked_at cannot be
// recreated: the error says which, and the transaction leaves everything
// as it was.
func (c *converter) sqliteSwap(ctx context.Context, ex execQueryer) error {
	ours := map[string]bool{}
	for _, s := range []string{"status_scheduled", "type", "locked_at", "type_status_scheduled", "status_expires", "lease_until"} {
		ours[c.t.IndexName(s)] = true
	}
	// Schema objects in creation order; LIKE is case-insensitive.
	objs, err := sqliteObjects(ctx, ex, `SELECT type, name, sql FROM sqlite_master
WHERE sql IS NOT NULL AND ((type = 'index' AND tbl_name = ?) OR (type IN ('trigger', 'view') AND (tbl_name = ? OR sql LIKE '%' || ? || '%')))
ORDER BY rowid`, c.t.Name, c.t.Name, c.t.Name)
	if err != nil {
		return err
	}
	var recreate []sqliteObject
	for _, o := range objs {
		if o.typ == "index" && (ours[o.name] || strings.Contains(strings.ToLower(o.sql), "retry_count") || strings.Contains(strings.ToLower(o.sql), "locked_at")) {
			continue // ours, or the user's on a column version 2 drops
		}
		if low := strings.ToLower(o.sql); o.typ != "index" && (strings.Contains(low, "retry_count") || strings.Contains(low, "locked_at")) {
			return fmt.Errorf("your %s %s uses retry_count or locked_at, which version 2 drops; drop it, run Migrate, then create it again for version 2", o.typ, o.name)
		}
		recreate = append(recreate, o)
		if o.typ == "view" || o.typ == "trigger" {
			if _, err := ex.ExecContext(ctx, "DROP "+strings.ToUpper(o.typ)+" "+quoteSQLite(o.name)); err != nil {
				return err
			}
		}
	}
	var seq sql.NullInt64
	rows, err := ex.QueryContext(ctx, `SELECT seq FROM sqlite_sequence WHERE name = ?`, c.t.Name)
	if err != nil && !strings.Contains(err.Error(), "no such table") {
		return err
	}
	if err == nil {
		for rows.Next() {
			if err := rows.Scan(&seq); err != nil {
				rows.Close()
				return err
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
	}
	stmts := []string{
		"DROP TABLE " + c.t.Quoted(),
		"ALTER TABLE " + c.sqliteTemp().Quoted() + " RENAME TO " + c.t.Quoted(),
	}
	for _, s := range stmts {
		if _, err := ex.ExecContext(ctx, s); err != nil {
			return err
		}
	}
	if seq.Valid {
		res, err := ex.ExecContext(ctx, `UPDATE sqlite_sequence SET seq = max(seq, ?) WHERE name = ?`, seq.Int64, c.t.Name)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err == nil && n == 0 {
			// The table is empty: the copy left no counter.
			if _, err := ex.ExecContext(ctx, `INSERT INTO sqlite_sequence (name, seq) VALUES (?, ?)`, c.t.Name, seq.Int64); err != nil {
				return err
			}
		}
	}
	for _, o := range recreate {
		_, err := ex.ExecContext(ctx, o.sql)
		if err == nil && o.typ == "view" {
			// SQLite checks a view's columns only when it is used.
			var rows *sql.Rows
			if rows, err = ex.QueryContext(ctx, "SELECT * FROM "+quoteSQLite(o.name)+" LIMIT 0"); err == nil {
				err = rows.Close()
			}
		}
		if err != nil {
			return fmt.Errorf("recreate your %s %s on the version 2 table: %w; drop it, run Migrate, then create it again for version 2", o.typ, o.name, err)
		}
	}
	return nil
}

// sqliteObject is one row of sqlite_master.
type sqliteObject struct{ typ, name, sql string }

// sqliteObjects runs a query of sqlite_master returning type, name, sql.
func sqliteObjects(ctx context.Context, ex execQueryer, q string, args ...any) ([]sqliteObject, error) {
	rows, err := ex.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []sqliteObject
	for rows.Next() {
		var o sqliteObject
		if err := rows.Scan(&o.typ, &o.name, &o.sql); err != nil {
			return nil, err
		}
		out = append(out, o)
	}
	return out, rows.Err()
}

// quoteSQLite quotes an identifier read from SQLite's catalog.
func quoteSQLite(name string) string {
	return `"` + strings.ReplaceAll(name, `"`, `""`) + `"`
}
