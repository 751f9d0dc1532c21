package queue

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/jobqueue/jobqueue/internal/engine"
)

// The generated queries (db/*gen) name the table `jobs`. The queue sends them
// to the table chosen at run time through runner, which gives each generated
// package its DBTX: every query text is rewritten once (rewriteTable: the
// identifier jobs, as a whole word of the engine's SQL, becomes the quoted
// table name; a query that names no such table is an error and is never
// sent) and the result is cached; time arguments
// are converted to the engine's UTC form (engine.Kind.TimeArg) in one place;
// and on MySQL and SQLite the rewritten statements are prepared once per
// connection and reused.

// runner runs the generated queries of one Queue against its table.
type runner struct {
	db     *sql.DB
	kind   engine.Kind
	quoted string
	table  string // the table's name, unquoted
	// prepare caches a *sql.Stmt per rewritten query. It pays off on MySQL,
	// where go-sql-driver otherwise prepares, executes and closes every
	// statement with arguments (three round trips), and on SQLite, where
	// it saves parsing; pgx already caches prepared statements per
	// connection, so PostgreSQL does not use it.
	prepare bool
	texts   sync.Map // generated query text → rewritten text
	stmts   sync.Map // rewritten text → *sql.Stmt
	// preparing marks the texts being prepared in the background, and
	// background counts those goroutines, so that close waits for them.
	preparing  sync.Map
	background sync.WaitGroup
	// observe, when set (tests), hears every statement before it is sent,
	// with the transaction or held connection it runs on (nil on the pool).
	observe func(query string, on sqlRunner)
	// pooled: the queue runs through a transaction pooler (setPooled),
	// so it keeps no session of its own.
	pooled bool
	// writer (SQLite) admits one of the queue's own attempt writes on the
	// pool at a time (sqliteStore.writing): see store_sqlite.go.
	writer chan struct{}
	// noPgx (PostgreSQL) is set once the pool's driver showed it is not
	// pgx's stdlib: claims then take the generated method (claim_postgres.go).
	noPgx atomic.Bool
	// copyFormat (PostgreSQL) is whether the table's columns fit the bulk
	// enqueue's binary COPY (copy_postgres.go), once checked.
	copyFormat atomic.Int32
	// recorded is a *sql.Row whose Scan returns errRecorded, for the
	// queryRecorders of the queue's hot paths to answer with (a Row with
	// an error only ever returns it, so one is shared).
	recorded *sql.Row
	// pgxExec (PostgreSQL): the pool's driver is pgx's stdlib itself,
	// which passes a pgx.QueryExecMode argument through to pgx, so a
	// query can be sent planned for its arguments (dbtx.ownPlan).
	pgxExec bool
}

func newRunner(db *sql.DB, t engine.Table) *runner {
	return &runner{
		db:       db,
		kind:     t.Kind,
		quoted:   t.Quoted(),
		table:    t.Name,
		prepare:  t.Kind != engine.Postgres,
		writer:   make(chan struct{}, 1),
		recorded: failedRow(context.Background(), errRecorded),
		pgxExec:  t.Kind == engine.Postgres && db != nil && isPgxStdlib(db.Driver()),
	}
}

// isPgxStdlib reports whether d is pgx's stdlib driver itself, not a
// wrapper: a wrapper (otelsql, sqlhooks) need not pass a pgx.QueryExecMode
// argument through, and database/sql would then send it as a parameter.
func isPgxStdlib(d driver.Driver) bool {
	_, ok := d.(*stdlib.Driver)
	return ok
}

// planned returns the DBTX, on the pool, that sends its PostgreSQL queries
// planned for their own arguments: the listings whose filters are optional
// (ListJobs' `(@type IS NULL OR type = @type)`). pgx otherwise prepares and
// caches each statement per connection, and after five runs PostgreSQL may
// settle on a generic plan, planned for no value of the filters, which
// cannot use the type index and reads the primary key backwards instead
// (a rare type's page then reads the whole table). See dbtx.ownPlan.
func (r *runner) planned() dbtx { return dbtx{r: r, ownPlan: true} }

// on returns the DBTX that runs queries on tx, or on the pool when tx is nil.
func (r *runner) on(tx *sql.Tx) dbtx { return dbtx{r: r, tx: tx} }

// onCallers returns the DBTX for a caller's transaction (EnqueueTx), which
// may belong to another *sql.DB than the queue's: its statements are not
// prepared (a statement prepared on the queue's pool cannot run there).
func (r *runner) onCallers(tx *sql.Tx) dbtx {
	return dbtx{r: r, tx: tx, unprepared: true, callers: true}
}

// text is query rewritten for the table (rewriteTable), cached; an error
// wrapping errNotRewritten when the query cannot be rewritten (it is then
// never sent).
func (r *runner) text(query string) (string, error) {
	if v, ok := r.texts.Load(query); ok {
		return v.(string), nil
	}
	s, _, err := rewriteTable(r.kind, query, r.quoted)
	if err != nil {
		return "", err
	}
	r.texts.Store(query, s)
	return s, nil
}

// failedRow is a *sql.Row whose Scan returns err, for QueryRowContext
// (database/sql has no constructor for one): it comes from a pool whose
// connector fails with err, so nothing is sent to any database.
func failedRow(ctx context.Context, err error) *sql.Row {
	db := sql.OpenDB(failingConnector{err})
	defer db.Close()
	return db.QueryRowContext(ctx, "")
}

// failingConnector is a driver.Connector whose connections fail with err.
type failingConnector struct{ err error }

func (c failingConnector) Connect(context.Context) (driver.Conn, error) { return nil, c.err }
func (c failingConnector) Driver() driver.Driver                        { return failingDriver(c) }

type failingDriver struct{ err error }

func (d failingDriver) Open(string) (driver.Conn, error) { return nil, d.err }

// stmt is the prepared statement for a rewritten query (nil when the
// runner does not prepare, or the statement cannot be prepared: the query
// then runs unprepared and reports its own error).
func (r *runner) stmt(ctx context.Context, text string) *sql.Stmt {
	if !r.prepare {
		return nil
	}
	if v, ok := r.stmts.Load(text); ok {
		return v.(*sql.Stmt)
	}
	st, err := r.db.PrepareContext(ctx, text)
	if err != nil {
		return nil
	}
	if v, loaded := r.stmts.LoadOrStore(text, st); loaded {
		st.Close()
		return v.(*sql.Stmt)
	}
	return st
}

// close closes the cached statements.
func (r *runner) close() {
	// A statement still being prepared in the background would otherwise
	// stay open, and keep using the pool after the caller closes it.
	r.background.Wait()
	r.stmts.Range(func(k, v any) bool {
		v.(*sql.Stmt).Close()
		r.stmts.Delete(k)
		return true
	})
}

// args converts time arguments to the engine's UTC form.
func (r *runner) args(args []any) []any {
	for i, a := range args {
		switch v := a.(type) {
		case time.Time:
			args[i] = r.kind.TimeArg(v)
		case sql.NullTime:
			if v.Valid {
				args[i] = r.kind.TimeArg(v.Time)
			} else {
				args[i] = nil
			}
		case *time.Time:
			if v != nil {
				args[i] = r.kind.TimeArg(*v)
			} else {
				args[i] = nil
			}
		}
	}
	return args
}

// dbtx is the generated packages' DBTX for one Queue's table, on the pool,
// on a transaction, or on one connection (conn, unprepared: connTx).
type dbtx struct {
	r          *runner
	tx         *sql.Tx
	conn       *sql.Conn
	unprepared bool       // never use prepared statements
	callers    bool       // tx is a caller's (onCallers)
	held       *connStmts // on conn: its prepared statements (onHeld)
	// notify: a PostgreSQL insert notifies in its own statement, as in a
	// caller's transaction (the first enqueue after a quiet spell:
	// pgNotifier.inline).
	notify bool
	// visible, when set, is called once the job an insert on d writes is
	// committed and may be claimed, which for the early commit
	// (enqueue_postgres_early.go) is before the insert returns: the queue
	// wakes its own idle workers then, unless claimed reports that an
	// offer of one of them claimed the job in the insert's transaction.
	visible func(claimed bool)
	// offers, when set, holds the offers of the queue's idle claimers
	// that an early commit may take (claim_offer.go).
	offers *offerBoard
	// ownPlan (runner.planned): on PostgreSQL through pgx's stdlib, each
	// query is sent unprepared (pgx.QueryExecModeExec: parse, bind and
	// execute an unnamed statement in the one round trip of a cached one),
	// so the server plans it for its arguments every time.
	ownPlan bool
}

// insertNotifies reports whether a PostgreSQL insert on d notifies the
// workers in its own statement (the Notify forms of the insert queries)
// rather than leaving it to the pgNotifier after the queue's own commit:
// in a caller's transaction (EnqueueTx, EnqueueManyTx, their keyed
// inserts: onCallers is what makes a dbtx unprepared, and PostgreSQL
// inserts on no other unprepared one), where the notification goes out at
// the caller's commit, and for the first enqueue after a quiet spell
// (notify, set from pgNotifier.inline), whose statement commits on its own.
func (d dbtx) insertNotifies() bool { return d.unprepared || d.notify }

// onConn returns the DBTX that runs queries unprepared on conn, a
// connection taken from the queue's pool (connTx).
func (r *runner) onConn(conn *sql.Conn) dbtx { return dbtx{r: r, conn: conn, unprepared: true} }

// onHeld returns the DBTX that runs queries on conn, a connection held for
// one purpose (a claim session), preparing each once there (stmts).
func (r *runner) onHeld(conn *sql.Conn, stmts *connStmts) dbtx {
	return dbtx{r: r, conn: conn, held: stmts}
}

// connStmts caches the statements prepared on one held connection: without
// them go-sql-driver prepares, executes and closes each statement with
// arguments (three round trips). They go with the connection (close).
type connStmts struct {
	m map[string]*sql.Stmt
	// prepare prepares a statement on the connection; nil is
	// conn.PrepareContext (tests make it fail).
	prepare func(ctx context.Context, conn *sql.Conn, text string) (*sql.Stmt, error)
}

// stmt is the statement for text prepared on conn; nil, nil when c is nil
// or the server cannot prepare it (the query then runs unprepared). Any
// other failure to prepare is the statement's error: the PREPARE may be
// the first command after the session's transaction was rolled back under
// it (a Galera node reports a brute-force abort to the next command, which
// may be this PREPARE), and running the statement unprepared would then
// run it outside that transaction.
func (c *connStmts) stmt(ctx context.Context, conn *sql.Conn, text string) (*sql.Stmt, error) {
	if c == nil {
		return nil, nil
	}
	if st, ok := c.m[text]; ok {
		return st, nil
	}
	var st *sql.Stmt
	var err error
	if c.prepare != nil {
		st, err = c.prepare(ctx, conn, text)
	} else {
		st, err = conn.PrepareContext(ctx, text)
	}
	switch {
	case isMySQLError(err, mysqlUnsupportedPS):
		return nil, nil
	case err != nil:
		return nil, err
	}
	if c.m == nil {
		c.m = map[string]*sql.Stmt{}
	}
	c.m[text] = st
	return st, nil
}

// mysqlUnsupportedPS is ER_UNSUPPORTED_PS: a statement MySQL cannot prepare.
const mysqlUnsupportedPS = 1295

// close closes the statements (before their connection is closed).
func (c *connStmts) close() {
	for text, st := range c.m {
		st.Close()
		delete(c.m, text)
	}
}

// prepared returns the statement for text on this DBTX, or nil to run the
// text unprepared.
func (d dbtx) prepared(ctx context.Context, text string) *sql.Stmt {
	if d.unprepared {
		return nil
	}
	if d.tx == nil {
		return d.r.stmt(ctx, text)
	}
	if !d.r.prepare {
		return nil
	}
	if v, ok := d.r.stmts.Load(text); ok {
		// The transaction's connection reuses the statement if it was
		// prepared there before (else prepares it there, for next time);
		// the returned Stmt closes with the transaction.
		return d.tx.StmtContext(ctx, v.(*sql.Stmt))
	}
	// Preparing on the pool needs a second connection, which a full pool
	// (or one limited to a single connection) would not give while this
	// transaction holds one: run unprepared now and prepare in the
	// background for the next time.
	if _, busy := d.r.preparing.LoadOrStore(text, true); !busy {
		d.r.background.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), newTimeout)
			defer cancel()
			if d.r.stmt(ctx, text) == nil {
				d.r.preparing.Delete(text) // try again another time
			}
		})
	}
	return nil
}

func (d dbtx) seen(text string) {
	if d.r.observe == nil {
		return
	}
	var on sqlRunner // nil on the pool
	if d.tx != nil || d.conn != nil {
		on = d.sender()
	}
	d.r.observe(text, on)
}

// sqlRunner is where a statement is sent unprepared, and where
// withStatementHook's function hears it runs: a *sql.Tx, a *sql.Conn held
// for a session of the queue's own (a claim session, connTx), or the
// pool's *sql.DB.
type sqlRunner interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// sender is where d sends a statement unprepared.
func (d dbtx) sender() sqlRunner {
	switch {
	case d.conn != nil:
		return d.conn
	case d.tx != nil:
		return d.tx
	default:
		return d.r.db
	}
}

// route readies a generated statement to run on d: its text for d's
// table, its time arguments in the engine's form, and the statement
// prepared where d runs it (nil: send the text unprepared to d.sender()).
// On a held connection a failed PREPARE is the statement's error
// (connStmts.stmt).
func (d dbtx) route(ctx context.Context, query string, args []any) (string, []any, *sql.Stmt, error) {
	text, err := d.r.text(query)
	if err != nil {
		return "", nil, nil, err
	}
	if err := fenced(ctx); err != nil {
		return "", nil, nil, err
	}
	args = d.r.args(args)
	d.seen(text)
	if d.conn != nil {
		st, err := d.held.stmt(ctx, d.conn, text)
		return text, args, st, err
	}
	return text, args, d.prepared(ctx, text), nil
}

// ExecContext runs a generated statement.
func (d dbtx) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	text, args, st, err := d.route(ctx, query, args)
	switch {
	case err != nil:
		return nil, err
	case st != nil:
		return explained(st.ExecContext(ctx, args...))
	default:
		return explained(d.sender().ExecContext(ctx, text, args...))
	}
}

// explained returns v and err, err explained (explainErr). Every statement
// the queue sends through database/sql or on pgx's connection (onPgx) has
// its error explained so, whichever API call returns it or worker logs it.
func explained[T any](v T, err error) (T, error) {
	return v, explainErr(err)
}

// explainErr adds what to do to the errors of a server reached the wrong
// way: pgx's statement cache behind a transaction pooler
// (engine.ExplainPooler: add default_query_exec_mode=exec to the URL), and
// a write refused on a read-only connection (engine.ExplainReadOnly:
// connect to the primary, target_session_attrs=read-write). Other errors
// are returned as they are.
func explainErr(err error) error {
	if err == nil {
		return nil
	}
	return engine.ExplainReadOnly(engine.ExplainPooler(err))
}

// explainedRow is row, or a row that fails with its error explained (see
// explained).
func explainedRow(ctx context.Context, row *sql.Row) *sql.Row {
	if err := row.Err(); err != nil {
		if e := explainErr(err); e != err {
			return failedRow(ctx, e)
		}
	}
	return row
}

// execOnce runs a statement built at run time from generated text (a
// multi-row insert) without caching or preparing it. text must already be
// rewritten.
func (d dbtx) execOnce(ctx context.Context, text string, args ...any) (sql.Result, error) {
	if err := fenced(ctx); err != nil {
		return nil, err
	}
	args = d.r.args(args)
	d.seen(text)
	return explained(d.sender().ExecContext(ctx, text, args...))
}

// PrepareContext prepares a generated statement.
func (d dbtx) PrepareContext(ctx context.Context, query string) (*sql.Stmt, error) {
	text, err := d.r.text(query)
	if err != nil {
		return nil, err
	}
	if d.conn != nil {
		return d.conn.PrepareContext(ctx, text)
	}
	if d.tx != nil {
		return d.tx.PrepareContext(ctx, text)
	}
	return d.r.db.PrepareContext(ctx, text)
}

// QueryContext runs a generated query.
func (d dbtx) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	text, args, st, err := d.route(ctx, query, args)
	if err == nil && st == nil {
		args = d.execMode(args)
	}
	switch {
	case err != nil:
		return nil, err
	case st != nil:
		return explained(st.QueryContext(ctx, args...))
	default:
		return explained(d.sender().QueryContext(ctx, text, args...))
	}
}

// execMode is args, led by pgx.QueryExecModeExec when d plans each query
// for its arguments (ownPlan) and the driver passes that through (pgxExec).
func (d dbtx) execMode(args []any) []any {
	if !d.ownPlan || !d.r.pgxExec || len(args) == 0 {
		return args
	}
	return append([]any{pgx.QueryExecModeExec}, args...)
}

// QueryRowContext runs a generated query that returns one row.
func (d dbtx) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	text, args, st, err := d.route(ctx, query, args)
	if err == nil && st == nil {
		args = d.execMode(args)
	}
	switch {
	case err != nil:
		return failedRow(ctx, err)
	case st != nil:
		return explainedRow(ctx, st.QueryRowContext(ctx, args...))
	default:
		return explainedRow(ctx, d.sender().QueryRowContext(ctx, text, args...))
	}
}
