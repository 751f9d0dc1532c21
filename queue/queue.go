package queue

import (
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"time"

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

// New opens the queue kept in db's table (see WithTable). The engine is
// detected from db's driver.
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
		now:             cfg.now,
		listener:        cfg.listener,
		policy:          cfg.policy,
		deleteOnSuccess: cfg.deleteOnSuccess,
	}
	return q, fmt.Errorf("jobqueue: New: not implemented yet")
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
