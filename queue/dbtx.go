package queue

import (
	"context"
	"database/sql"
	"sync"
	"time"

	"github.com/jobqueue/jobqueue/internal/engine"
)

// The generated queries (db/*gen) name the table `jobs`. The queue sends them
// to the table chosen at run time through runner, which gives each generated
// package its DBTX: every query text is rewritten once (the identifier jobs,
// as a whole word outside string literals, quoted identifiers and comments,
// becomes the quoted table name) and the result is cached; time arguments
// are converted to the engine's UTC form (engine.Kind.TimeArg) in one place;
// and on MySQL and SQLite the rewritten statements are prepared once per
// connection and reused.

// runner runs the generated queries of one Queue against its table.
type runner struct {
	db     *sql.DB
	kind   engine.Kind
	quoted string
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
	// with the transaction it runs in (nil on the pool).
	observe func(query string, tx *sql.Tx)
}

func newRunner(db *sql.DB, t engine.Table) *runner {
	return &runner{
		db:      db,
		kind:    t.Kind,
		quoted:  t.Quoted(),
		prepare: t.Kind != engine.Postgres,
	}
}

// on returns the DBTX that runs queries on tx, or on the pool when tx is nil.
func (r *runner) on(tx *sql.Tx) dbtx { return dbtx{r: r, tx: tx} }

// onCallers returns the DBTX for a caller's transaction (EnqueueTx), which
// may belong to another *sql.DB than the queue's: its statements are not
// prepared (a statement prepared on the queue's pool cannot run there).
func (r *runner) onCallers(tx *sql.Tx) dbtx { return dbtx{r: r, tx: tx, unprepared: true} }

// text is query rewritten for the table, cached.
func (r *runner) text(query string) string {
	if v, ok := r.texts.Load(query); ok {
		return v.(string)
	}
	s := rewriteTable(query, r.quoted)
	r.texts.Store(query, s)
	return s
}

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

// dbtx is the generated packages' DBTX for one Queue's table, on the pool or
// on a transaction.
type dbtx struct {
	r          *runner
	tx         *sql.Tx
	unprepared bool // never use prepared statements
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
	if d.r.observe != nil {
		d.r.observe(text, d.tx)
	}
}

// ExecContext runs a generated statement.
func (d dbtx) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	text := d.r.text(query)
	args = d.r.args(args)
	d.seen(text)
	if st := d.prepared(ctx, text); st != nil {
		return st.ExecContext(ctx, args...)
	}
	if d.tx != nil {
		return d.tx.ExecContext(ctx, text, args...)
	}
	return d.r.db.ExecContext(ctx, text, args...)
}

// execOnce runs a statement built at run time from generated text (a
// multi-row insert) without caching or preparing it. text must already be
// rewritten.
func (d dbtx) execOnce(ctx context.Context, text string, args ...any) (sql.Result, error) {
	args = d.r.args(args)
	d.seen(text)
	if d.tx != nil {
		return d.tx.ExecContext(ctx, text, args...)
	}
	return d.r.db.ExecContext(ctx, text, args...)
}

// PrepareContext prepares a generated statement.
func (d dbtx) PrepareContext(ctx context.Context, query string) (*sql.Stmt, error) {
	text := d.r.text(query)
	if d.tx != nil {
		return d.tx.PrepareContext(ctx, text)
	}
	return d.r.db.PrepareContext(ctx, text)
}

// QueryContext runs a generated query.
func (d dbtx) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	text := d.r.text(query)
	args = d.r.args(args)
	d.seen(text)
	if st := d.prepared(ctx, text); st != nil {
		return st.QueryContext(ctx, args...)
	}
	if d.tx != nil {
		return d.tx.QueryContext(ctx, text, args...)
	}
	return d.r.db.QueryContext(ctx, text, args...)
}

// QueryRowContext runs a generated query that returns one row.
func (d dbtx) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	text := d.r.text(query)
	args = d.r.args(args)
	d.seen(text)
	if st := d.prepared(ctx, text); st != nil {
		return st.QueryRowContext(ctx, args...)
	}
	if d.tx != nil {
		return d.tx.QueryRowContext(ctx, text, args...)
	}
	return d.r.db.QueryRowContext(ctx, text, args...)
}

// rewriteTable replaces the identifier jobs (any case), where it stands as a
// whole word outside string literals, quoted identifiers and comments, with
// quoted. The generated queries keep `jobs` out of column aliases, so every
// such word is the table.
func rewriteTable(query, quoted string) string {
	const word = "jobs"
	out := make([]byte, 0, len(query)+8*len(quoted))
	for i := 0; i < len(query); {
		c := query[i]
		switch {
		case c == '\'' || c == '"' || c == '`':
			// A literal or quoted identifier; a doubled quote stays inside
			// it, and so does a backslash escape (MySQL string literals).
			j := i + 1
			for j < len(query) {
				if query[j] == '\\' && c == '\'' && j+1 < len(query) {
					j += 2
					continue
				}
				if query[j] == c {
					if j+1 < len(query) && query[j+1] == c {
						j += 2
						continue
					}
					j++
					break
				}
				j++
			}
			out = append(out, query[i:j]...)
			i = j
		case c == '-' && i+1 < len(query) && query[i+1] == '-':
			j := i
			for j < len(query) && query[j] != '\n' {
				j++
			}
			out = append(out, query[i:j]...)
			i = j
		case c == '/' && i+1 < len(query) && query[i+1] == '*':
			j := i + 2
			for j+1 < len(query) && !(query[j] == '*' && query[j+1] == '/') {
				j++
			}
			j = min(j+2, len(query))
			out = append(out, query[i:j]...)
			i = j
		case isIdentByte(c):
			j := i
			for j < len(query) && isIdentByte(query[j]) {
				j++
			}
			if j-i == len(word) && equalFoldASCII(query[i:j], word) {
				out = append(out, quoted...)
			} else {
				out = append(out, query[i:j]...)
			}
			i = j
		default:
			out = append(out, c)
			i++
		}
	}
	return string(out)
}

func isIdentByte(c byte) bool {
	return c == '_' || c == '$' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c >= 0x80
}

func equalFoldASCII(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		x, y := a[i], b[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}
