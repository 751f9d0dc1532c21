package queue

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jobqueue/jobqueue/internal/ddl"
	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/policy"
)

// JobArgs is what a job carries. Kind names the job (it is stored in the
// name column and picks the handler); the codec turns the value into the
// payload.
type JobArgs interface {
	// Kind names the job: at most 255 characters, never empty. Jobs of one
	// Go type should return one constant kind.
	Kind() string
}

// RawArgs is a job given as its kind and its JSON payload as they are, for
// callers without a Go type for the job (the command line, producers in
// other languages). The payload is stored as given, bypassing the codec; it
// must be valid JSON, and empty means {}.
type RawArgs struct {
	// Name is the job's kind.
	Name string
	// Payload is the job's JSON payload, stored as it is ({} when empty).
	Payload json.RawMessage
}

// Kind is the job's kind, r.Name.
func (r RawArgs) Kind() string { return r.Name }

// Codec turns job args into the payload and back. The default is JSON.
type Codec interface {
	// Marshal encodes job args into the payload, which must be JSON (the
	// table's payload column holds JSON on every engine).
	Marshal(v any) ([]byte, error)
	// Unmarshal decodes a payload into the args of a typed handler.
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
	// StatusPending: waiting to run, from its ScheduledAt on (also between
	// attempts).
	StatusPending Status = "pending"
	// StatusInProgress: claimed by a worker; an attempt runs under a lease.
	StatusInProgress Status = "in_progress"
	// StatusCompleted: its handler succeeded (finished).
	StatusCompleted Status = "completed"
	// StatusFailed: failed for good (attempts used up, a permanent error,
	// or cancelled); Retry runs it again (finished).
	StatusFailed Status = "failed"
	// StatusExpired: its deadline (ExpiresAt) passed before it completed;
	// Retry runs it again (finished).
	StatusExpired Status = "expired"
)

// Statuses returns every status, in the order of a job's life (a new
// slice each time). The list is internal/ddl's, which the table's
// definition (the MySQL ENUM) is built from too.
func Statuses() []Status {
	names := ddl.Statuses()
	out := make([]Status, len(names))
	for i, n := range names {
		out[i] = Status(n)
	}
	return out
}

// RetryPolicy says how often a job is attempted and how long it waits
// between attempts: after attempt n fails, it waits
// min(BaseDelay × 2^(n−1), MaxDelay). The table stores the delays in whole
// seconds; a policy with a zero or negative field, delays that are not
// whole seconds, or numbers beyond the table's INT columns is refused with
// ErrInvalidPolicy.
type RetryPolicy struct {
	// MaxAttempts is the number of attempts, the first one included.
	MaxAttempts int
	// BaseDelay is the wait after the first failed attempt; each later
	// failure doubles it.
	BaseDelay time.Duration
	// MaxDelay caps the wait between attempts.
	MaxDelay time.Duration
}

// Validate reports a policy the table cannot store, as an error wrapping
// ErrInvalidPolicy that says which field and why.
func (p RetryPolicy) Validate() error { return p.internal().Validate() }

// internal is p as the internal/policy package (shared with migrations)
// takes it.
func (p RetryPolicy) internal() policy.RetryPolicy { return policy.RetryPolicy(p) }

// DefaultRetryPolicy returns the policy of jobs when neither the queue
// (WithRetryPolicy) nor the job (Policy) sets one: 3 attempts, base delay 1
// minute, max delay 1 hour.
func DefaultRetryPolicy() RetryPolicy { return RetryPolicy(policy.Default) }

// JobRow is one row of the jobs table (SPEC section 2), as List, Get and
// handlers see it. Times are UTC; a nil time is NULL in the table.
type JobRow struct {
	// ID is the job's id, given by the table when it was enqueued.
	ID int64
	// Name is the job's kind (JobArgs.Kind).
	Name string
	// Type is the queue the job belongs to ("default" unless given).
	Type string
	// Payload is the job's args as the codec encoded them (JSON).
	Payload json.RawMessage
	// Status is where the job is in its life.
	Status Status
	// Attempts counts the attempts started, the current one included.
	Attempts int
	// ClaimToken names the current attempt while the job is in_progress
	// ("" when none runs); the attempt's writes are fenced by it.
	ClaimToken string
	// LeaseUntil is when the current attempt's lease ends, unless its
	// worker renews it; after that the attempt counts as abandoned.
	LeaseUntil *time.Time
	// MaxAttempts, BaseDelay and MaxDelay are the job's retry policy.
	MaxAttempts int
	// BaseDelay is the wait after the first failed attempt (whole seconds).
	BaseDelay time.Duration
	// MaxDelay caps the wait between attempts (whole seconds).
	MaxDelay time.Duration
	// Error is the text of the last failed attempt's error ("" if none).
	Error string
	// ScheduledAt is the earliest time the job may run next.
	ScheduledAt time.Time
	// ExpiresAt is the job's deadline: a job that has not completed by
	// then expires.
	ExpiresAt *time.Time
	// FinishedAt is when the job completed, failed or expired.
	FinishedAt *time.Time
	// CreatedAt is when the job was enqueued.
	CreatedAt time.Time
}

// Job is a claimed job with its decoded, typed args, as a handler sees it.
type Job[T JobArgs] struct {
	*JobRow
	// Args are the job's args, decoded from JobRow.Payload by the codec.
	Args T
}

// Errors callers can test for with errors.Is.
var (
	// ErrInvalidTableName: the table name does not match [a-zA-Z_][a-zA-Z0-9_]*
	// or is too long for the engine (or, on SQLite, starts with its
	// reserved sqlite_). No SQL ran.
	ErrInvalidTableName = engine.ErrInvalidTableName
	// ErrUnsupportedDatabase: the *sql.DB's driver is not pgx, go-sql-driver/mysql
	// or modernc.org/sqlite, nor a wrapper of one of them that New detects
	// or is told of with WithEngine.
	ErrUnsupportedDatabase = engine.ErrUnsupportedDatabase
	// ErrOutdatedTable: the table is version 1 or half migrated; run
	// migrations.Migrate.
	ErrOutdatedTable = engine.ErrOutdatedTable
	// ErrForeignTable: a table of the name exists but is not a jobqueue
	// table (another program's); choose another table name.
	ErrForeignTable = engine.ErrForeignTable
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
	// ErrJobNotFound: Get, Cancel, Delete or RetryMany found no job with the id (it
	// never existed, or was pruned or deleted). Retry returns false for
	// such an id; Get's error then says why, in the same words.
	ErrJobNotFound = errors.New("jobqueue: job not found")
	// ErrInvalidID: Get, Cancel, Delete, Retry or one of their many-id
	// forms was given an id that is not positive (job ids are 1 and up).
	// Nothing was read or written; for the many-id forms, nothing was done
	// for any of the ids.
	ErrInvalidID = errors.New("jobqueue: invalid job id")
	// ErrTableMissing: New found no table of the name; create it with
	// migrations.Install (or `jobqueue install`).
	ErrTableMissing = engine.ErrTableMissing
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
	// EventClaimed: a worker claimed the job (Event.Job, its attempt
	// counted) and is about to run its handler.
	EventClaimed EventKind = "claimed"
	// EventCompleted: the handler succeeded and the job is completed (or
	// deleted, with WithDeleteOnSuccess).
	EventCompleted EventKind = "completed"
	// EventFailed: an attempt failed (Event.Err); Event.Permanent tells
	// whether the job will be retried, Event.Outcome how it ended.
	EventFailed EventKind = "failed"
	// EventReclaimed: Reclaim ended Event.Count abandoned attempts (Job is
	// nil); also heard from a Reclaim that then failed, for the attempts
	// its earlier statements ended.
	EventReclaimed EventKind = "reclaimed"
	// EventLost: an attempt that had lost its job ended; its result changed
	// nothing. Its job was cancelled (Event.Outcome is OutcomeCancelled), or
	// its lease ran out and the job was reclaimed, retried or deleted
	// (OutcomeLost). It is heard once its handler returned (Err is the
	// handler's error, if any; Duration how long it ran), or at once for an
	// attempt that lost its job before its handler started (Duration 0).
	// An attempt with OutcomeLost is the one a Reclaim ended (or will end,
	// once its lease passes) and counts in its EventReclaimed, in whichever
	// process ran it: a listener that counts attempts counts it there, not
	// again here (the telemetry does so). So is one with OutcomeCancelled
	// and CountedByCancel: its lease had passed when it was cancelled, and
	// the canceller counts it (EventCancelled).
	EventLost EventKind = "lost"
	// EventCancelled: Cancel ended Event.Count in_progress attempts whose
	// lease had already passed (Job is nil; Event.Cancelled counts them
	// per type). Their workers are presumed gone (the process died before
	// Reclaim ran), so the process that cancelled them counts them; a
	// worker that was alive after all, only late, hears EventLost with
	// OutcomeCancelled and CountedByCancel, and counts nothing. The
	// attempts whose lease still ran are their workers' to count (EventLost,
	// OutcomeCancelled). The lease is compared with the cancel's
	// finished_at to the second, by the same rule in both processes.
	EventCancelled EventKind = "cancelled"
	// EventLeadershipGained: this worker now leads the table's workers
	// (runs the maintenance and enqueues the periodic jobs); Event.Leader
	// says who and since when.
	EventLeadershipGained EventKind = "leadership_gained"
	// EventLeadershipLost: this worker no longer leads (its lease passed or
	// another worker holds it, or the worker stopped); Event.Err says why.
	EventLeadershipLost EventKind = "leadership_lost"
)

// Event is what a listener hears. Job is the row as the event left it where
// known (for EventReclaimed, the number of jobs is in Count and Job is nil).
type Event struct {
	// Kind says what happened.
	Kind EventKind
	// Job is the job as the event left it (nil for EventReclaimed).
	Job *JobRow
	// Err is the attempt's error, for EventFailed.
	Err error
	// Permanent is true for EventFailed when the job will not be retried
	// (it is failed or expired now).
	Permanent bool
	// Outcome is how the attempt ended, for EventCompleted
	// (OutcomeCompleted), EventFailed (OutcomeRetried, OutcomeFailed or
	// OutcomeExpired) and EventLost (OutcomeCancelled or OutcomeLost).
	// Every claimed attempt ends in exactly one of these events (an attempt
	// the shutdown interrupted and released is an EventFailed whose Err
	// wraps ErrWorkerShutdown; one given back unstarted an EventFailed with
	// GivenBack), except those whose worker stopped before writing their
	// end and those whose write failed (both left to Reclaim, whose
	// EventReclaimed counts them in Reclaimed).
	Outcome Outcome
	// Count is the number of jobs, for EventReclaimed and EventCancelled.
	Count int64
	// Reclaimed is, for EventReclaimed, how many of those attempts ended
	// per type and outcome (retried, failed or expired), sorted by type
	// then outcome; their counts add up to Count.
	Reclaimed []ReclaimedCount
	// Cancelled is, for EventCancelled, how many of those attempts were of
	// each type, sorted by type; their counts add up to Count.
	Cancelled []CancelledCount
	// CountedByCancel is true for the EventLost (OutcomeCancelled) of an
	// attempt whose lease had passed when Cancel ended it: the process
	// that cancelled it counted it (EventCancelled), so a listener that
	// counts attempts does not count it again here.
	CountedByCancel bool
	// Duration is how long the handler ran, for EventCompleted, EventFailed
	// and EventLost.
	Duration time.Duration
	// GivenBack is true for the EventFailed of an attempt whose handler
	// never started (it waited in the claimer's buffer when the worker shut
	// down, or its lease or its job's deadline passed meanwhile): its job
	// was given back as before the claim, the attempt not counted in its
	// attempts (Outcome OutcomeRetried, Duration 0). Metrics of attempts
	// skip it.
	GivenBack bool
	// Leader is this worker's leadership, for EventLeadershipGained and
	// EventLeadershipLost (Holder only, for the latter).
	Leader *Leader
}

// ReclaimedCount is how many abandoned attempts of one type Reclaim ended
// with one outcome (Event.Reclaimed).
type ReclaimedCount struct {
	// Type is the jobs' type.
	Type string
	// Outcome is how Reclaim ended them: OutcomeRetried, OutcomeFailed or
	// OutcomeExpired.
	Outcome Outcome
	// Count is how many.
	Count int64
}

// CancelledCount is how many attempts of one type whose lease had passed
// one Cancel ended (Event.Cancelled).
type CancelledCount struct {
	// Type is the jobs' type.
	Type string
	// Count is how many.
	Count int64
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
