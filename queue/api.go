package queue

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/policy"
)

// JobArgs is what a job carries. Kind names the job (it is stored in the
// name column and picks the handler); the codec turns the value into the
// payload.
type JobArgs interface {
	Kind() string
}

// RawArgs is a job given as its kind and its JSON payload as they are, for
// callers without a Go type for the job (the command line, producers in
// other languages). The payload is stored as given, bypassing the codec; it
// must be valid JSON, and empty means {}.
type RawArgs struct {
	Name    string
	Payload json.RawMessage
}

// Kind is the job's kind, r.Name.
func (r RawArgs) Kind() string { return r.Name }

// Codec turns job args into the payload and back. The default is JSON.
type Codec interface {
	Marshal(v any) ([]byte, error)
	Unmarshal(data []byte, v any) error
}

// JSONCodec is the default Codec, encoding/json.
type JSONCodec struct{}

// Marshal encodes v with encoding/json.
func (JSONCodec) Marshal(v any) ([]byte, error) { return json.Marshal(v) }

// Unmarshal decodes data with encoding/json.
func (JSONCodec) Unmarshal(data []byte, v any) error { return json.Unmarshal(data, v) }

// Status is the state of a job.
type Status string

// The statuses a job goes through (SPEC section 3).
const (
	StatusPending    Status = "pending"
	StatusInProgress Status = "in_progress"
	StatusCompleted  Status = "completed"
	StatusFailed     Status = "failed"
	StatusExpired    Status = "expired"
)

// Statuses lists every status, in the order of a job's life.
var Statuses = []Status{StatusPending, StatusInProgress, StatusCompleted, StatusFailed, StatusExpired}

// RetryPolicy says how often a job is attempted and how long it waits
// between attempts: min(BaseDelay × 2^(attempts−1), MaxDelay).
type RetryPolicy = policy.RetryPolicy

// DefaultRetryPolicy is used when neither the queue nor the job sets one:
// 3 attempts, base delay 1 minute, max delay 1 hour.
var DefaultRetryPolicy = policy.Default

// JobRow is one row of the jobs table. Times are UTC.
type JobRow struct {
	ID          int64
	Name        string // the kind
	Type        string // the queue it belongs to
	Payload     json.RawMessage
	Status      Status
	Attempts    int // attempts started, the current one included
	ClaimToken  string
	LeaseUntil  *time.Time
	MaxAttempts int
	BaseDelay   time.Duration
	MaxDelay    time.Duration
	Error       string
	ScheduledAt time.Time
	ExpiresAt   *time.Time
	FinishedAt  *time.Time
	CreatedAt   time.Time
}

// Job is a claimed job with its decoded, typed args, as a handler sees it.
type Job[T JobArgs] struct {
	*JobRow
	Args T
}

// Errors callers can test for with errors.Is.
var (
	// ErrInvalidTableName: the table name does not match [a-zA-Z_][a-zA-Z0-9_]*
	// or is too long for the engine. No SQL ran.
	ErrInvalidTableName = engine.ErrInvalidTableName
	// ErrUnsupportedDatabase: the *sql.DB's driver is not pgx, go-sql-driver/mysql
	// or modernc.org/sqlite.
	ErrUnsupportedDatabase = engine.ErrUnsupportedDatabase
	// ErrOutdatedTable: the table is version 1 or half migrated; run
	// migrations.Migrate.
	ErrOutdatedTable = engine.ErrOutdatedTable
	// ErrInvalidPolicy: a retry policy with a zero or negative field.
	ErrInvalidPolicy = policy.ErrInvalidPolicy
	// ErrInvalidJob: a job that cannot be enqueued as given (empty or too long
	// kind, too long type, deadline before its scheduled time, …). Nothing
	// was written.
	ErrInvalidJob = errors.New("jobqueue: invalid job")
	// ErrPayloadRejected: the args did not encode, or the database would not
	// store the payload (PostgreSQL's JSONB rejects \u0000). Nothing was written.
	ErrPayloadRejected = errors.New("jobqueue: payload rejected")
	// ErrLeaseLost: the attempt no longer holds its job (its lease ran out and
	// the job was reclaimed, retried or deleted); nothing was changed.
	ErrLeaseLost = errors.New("jobqueue: lease lost")
	// ErrJobNotFound: Get found no job with the id (it never existed, or
	// was pruned or deleted on success).
	ErrJobNotFound = errors.New("jobqueue: job not found")
	// ErrTableMissing: New found no table of the name; create it with
	// migrations.Install (or `jobqueue install`).
	ErrTableMissing = errors.New("jobqueue: table missing")
	// ErrInvalidFilter: List was given a filter it cannot run (unknown
	// status, negative AfterID, Limit out of range). Nothing was read.
	ErrInvalidFilter = errors.New("jobqueue: invalid list filter")
)

// permanentError marks a handler error that must not be retried.
type permanentError struct{ err error }

func (e *permanentError) Error() string { return e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

// Permanent wraps a handler's error so that the job fails for good, whatever
// attempts it has left (it still expires if its deadline has passed).
func Permanent(err error) error {
	if err == nil {
		err = errors.New("failed permanently")
	}
	return &permanentError{err: err}
}

// IsPermanent reports whether err was made by Permanent.
func IsPermanent(err error) bool {
	var p *permanentError
	return errors.As(err, &p)
}

// RetryAfterError is a handler error that asks for the next attempt after
// Delay instead of the policy's backoff. The attempt still counts: a job with
// no attempts left fails.
type RetryAfterError struct {
	// Delay is how long after the failed attempt the next one may start
	// (a negative Delay means at once).
	Delay time.Duration
	// Err is the handler's error; its text is stored with the job.
	Err error
}

// Error is the text of Err (or "retry after <Delay>" when Err is nil).
func (e *RetryAfterError) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("retry after %v", e.Delay)
	}
	return e.Err.Error()
}

// Unwrap returns Err, so that errors.Is and errors.As see the handler's
// error.
func (e *RetryAfterError) Unwrap() error { return e.Err }

// RetryAfter wraps a handler's error so that the job is retried after d
// rather than after the policy's backoff.
func RetryAfter(d time.Duration, err error) error {
	return &RetryAfterError{Delay: d, Err: err}
}

// EventKind names what a listener hears.
type EventKind string

// The events a listener hears.
const (
	EventClaimed   EventKind = "claimed"
	EventCompleted EventKind = "completed"
	EventFailed    EventKind = "failed" // Event.Permanent tells whether it will be retried
	EventReclaimed EventKind = "reclaimed"
)

// Event is what a listener hears. Job is the row as the event left it where
// known (for EventReclaimed, the number of jobs is in Count and Job is nil).
type Event struct {
	Kind EventKind
	Job  *JobRow
	// Err is the attempt's error, for EventFailed.
	Err error
	// Permanent is true for EventFailed when the job will not be retried
	// (it is failed or expired now).
	Permanent bool
	// Count is the number of jobs, for EventReclaimed.
	Count int64
	// Duration is how long the handler ran, for EventCompleted and EventFailed.
	Duration time.Duration
}

// ListFilter selects jobs for List. Its zero value selects the newest
// DefaultListLimit jobs of every status, type and kind; set fields narrow
// the selection, all of them at once.
type ListFilter struct {
	// Status selects the jobs in this status ("" for any).
	Status Status
	// Type selects the jobs of this type, the queue they belong to ("" for
	// any).
	Type string
	// Name selects the jobs of this kind, exactly ("" for any).
	Name string
	// Limit is the most jobs one call returns: 0 means DefaultListLimit; at
	// most MaxListLimit.
	Limit int
	// AfterID, when above 0, selects only jobs with smaller ids: the page
	// after the one whose last (oldest) job had this id.
	AfterID int64
}
