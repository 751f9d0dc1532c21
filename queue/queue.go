package queue

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/jobqueue/jobqueue/internal/engine"
)

// Queue is a job queue kept in one table of a database. It is safe for
// concurrent use; open it once with New and share it.
type Queue struct {
	db     *sql.DB
	table  engine.Table
	kind   engine.Kind
	logger *slog.Logger
	wake   *wakeHub
	codec  Codec
	// now is the queue's clock; it returns UTC times. Tests inject one.
	now             func() time.Time
	listener        func(Event)
	policy          RetryPolicy
	deleteOnSuccess bool
	// run sends the generated queries to the table; st is the engine's
	// adapter over them.
	run *runner
	st  store
	// analyzed is set once the queue has refreshed the table's planner
	// statistics after a first bulk enqueue (see analyzeOnce).
	analyzed atomic.Bool
}

// Option configures a Queue in New.
type Option func(*config) error

type config struct {
	table           string
	policy          RetryPolicy
	logger          *slog.Logger
	codec           Codec
	deleteOnSuccess bool
	listener        func(Event)
	now             func() time.Time
	observe         func(string, *sql.Tx)
}

// WithTable sets the table's name (default "jobs").
func WithTable(name string) Option {
	return func(c *config) error { c.table = name; return nil }
}

// WithRetryPolicy sets the retry policy of jobs enqueued without their own
// (default DefaultRetryPolicy).
func WithRetryPolicy(p RetryPolicy) Option {
	return func(c *config) error {
		if err := p.Validate(); err != nil {
			return err
		}
		c.policy = p
		return nil
	}
}

// WithLogger sets the logger (default slog.Default()).
func WithLogger(l *slog.Logger) Option {
	return func(c *config) error {
		if l == nil {
			return errors.New("jobqueue: WithLogger: the logger is nil")
		}
		c.logger = l
		return nil
	}
}

// WithCodec sets the codec that turns job args into payloads (default
// JSONCodec). The payload must be JSON, since every engine stores JSON.
func WithCodec(c Codec) Option {
	return func(cfg *config) error {
		if c == nil {
			return errors.New("jobqueue: WithCodec: the codec is nil")
		}
		cfg.codec = c
		return nil
	}
}

// WithDeleteOnSuccess makes a completed job's row be deleted instead of kept
// as completed.
func WithDeleteOnSuccess(on bool) Option {
	return func(c *config) error { c.deleteOnSuccess = on; return nil }
}

// WithListener sets a function that hears claimed, completed, failed and
// reclaimed events. It is called synchronously by the goroutine that caused
// the event, so it must return quickly and be safe for concurrent use.
func WithListener(fn func(Event)) Option {
	return func(c *config) error { c.listener = fn; return nil }
}

// withClock sets the queue's clock (tests only).
func withClock(now func() time.Time) Option {
	return func(c *config) error { c.now = now; return nil }
}

// withStatementHook makes the queue call fn with the text of every
// statement before it sends it, and the transaction it runs in (nil on the
// pool). Tests count statements with it.
func withStatementHook(fn func(query string, tx *sql.Tx)) Option {
	return func(c *config) error { c.observe = fn; return nil }
}

// newTimeout bounds the checks New runs, since New takes no context.
const newTimeout = 30 * time.Second

// New opens the queue kept in db's table (see WithTable; default "jobs").
// The engine is detected from db's driver (pgx's stdlib,
// go-sql-driver/mysql or modernc.org/sqlite). The table must exist and be
// version 2: create it with migrations.Install (or `jobqueue install`) and
// convert a version 1 table with migrations.Migrate. On MySQL the DSN must
// have parseTime=true. New keeps no state outside the Queue; open as many
// queues (on as many tables) as needed.
func New(db *sql.DB, opts ...Option) (*Queue, error) {
	kind, err := engine.Detect(db)
	if err != nil {
		return nil, err
	}
	cfg := config{table: "jobs", policy: DefaultRetryPolicy, codec: JSONCodec{}}
	for _, o := range opts {
		if err := o(&cfg); err != nil {
			return nil, err
		}
	}
	table, err := engine.ParseTable(kind, cfg.table)
	if err != nil {
		return nil, err
	}
	if cfg.logger == nil {
		cfg.logger = slog.Default()
	}
	if cfg.now == nil {
		cfg.now = func() time.Time { return time.Now().UTC() }
	}
	q := &Queue{
		db:              db,
		table:           table,
		kind:            kind,
		logger:          cfg.logger.With("table", table.Name),
		wake:            newWakeHub(),
		codec:           cfg.codec,
		now:             func() time.Time { return cfg.now().UTC() },
		listener:        cfg.listener,
		policy:          cfg.policy,
		deleteOnSuccess: cfg.deleteOnSuccess,
		run:             newRunner(db, table),
	}
	q.run.observe = cfg.observe
	switch kind {
	case engine.Postgres:
		q.st = pgStore{q.run}
	case engine.MySQL:
		q.st = mysqlStore{q.run}
	default:
		q.st = sqliteStore{q.run}
	}
	ctx, cancel := context.WithTimeout(context.Background(), newTimeout)
	defer cancel()
	if err := q.st.probe(ctx); err != nil {
		q.run.close()
		return nil, q.explainProbe(err)
	}
	return q, nil
}

// explainProbe turns the error of the table check into one that says what
// to do.
func (q *Queue) explainProbe(err error) error {
	missingTable, missingColumn := false, false
	var pe *pgconn.PgError
	var me *mysql.MySQLError
	switch {
	case errors.As(err, &pe):
		missingTable, missingColumn = pe.Code == "42P01", pe.Code == "42703"
	case errors.As(err, &me):
		missingTable, missingColumn = me.Number == 1146, me.Number == 1054
	default:
		msg := err.Error()
		missingTable, missingColumn = strings.Contains(msg, "no such table"), strings.Contains(msg, "no such column")
	}
	name := q.table.Name
	switch {
	case missingTable:
		return fmt.Errorf("%w: %s table %q does not exist; create it with migrations.Install(ctx, db, %q) or `jobqueue install --table %s`", ErrTableMissing, q.kind, name, name, name)
	case missingColumn:
		return fmt.Errorf("%w: table %q lacks the version 2 columns (%v); convert it once with migrations.Migrate(ctx, db, policy, %q) or `jobqueue migrate --table %s`", ErrOutdatedTable, name, err, name, name)
	}
	return fmt.Errorf("jobqueue: checking table %q: %w", name, err)
}

// Close releases the statements the queue prepared. It does not close the
// *sql.DB, which belongs to the caller. A queue is not used after Close.
func (q *Queue) Close() error {
	q.run.close()
	return nil
}

// Table is the name of the queue's table, as the database stores it.
func (q *Queue) Table() string { return q.table.Name }

// Engine is the database engine: "postgres", "mysql" or "sqlite".
func (q *Queue) Engine() string { return string(q.kind) }

// emit hands ev to the listener, if any.
func (q *Queue) emit(ev Event) {
	if q.listener != nil {
		q.listener(ev)
	}
}
