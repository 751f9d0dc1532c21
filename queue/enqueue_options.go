package queue

// The enqueue options (Type, At, Delay, ExpiresAt, ExpiresIn, Policy; the
// unique-key options are in unique.go) and resolve, which checks them
// against each other and turns them into a job's type, schedule, deadline,
// policy and key.

import (
	"fmt"
	"time"

	"github.com/jobqueue/jobqueue/internal/jobtext"
)

// EnqueueOption sets something about an enqueued job (for EnqueueMany,
// about every job of the call).
type EnqueueOption func(*enqueueOpts)

type enqueueOpts struct {
	typ       *string
	at        *time.Time
	delay     *time.Duration
	expiresAt *time.Time
	expiresIn *time.Duration
	policy    *RetryPolicy
	uniqueKey *string
	uniqueFor *time.Duration
	// call is the call's schedule and deadline when a job's own options
	// follow them (ownOptions).
	call *enqueueOpts
}

// ownOptions goes between the call's options and a job's own
// (WithOptions), which are applied after the call's: a schedule (At or
// Delay) or a deadline (ExpiresAt or ExpiresIn) of the job's own replaces
// the call's whole, so a job's At overrides the call's Delay rather than
// clashing with it; its other options replace the call's one by one.
func ownOptions(o *enqueueOpts) {
	call := *o
	o.call = &call
	o.at, o.delay, o.expiresAt, o.expiresIn = nil, nil, nil, nil
}

// checkOneSchedule checks that o's options of one list (the call's, or a job's
// own) give at most one schedule and one deadline.
func (o *enqueueOpts) checkOneSchedule() error {
	if o.at != nil && o.delay != nil {
		return fmt.Errorf("%w: both At and Delay are given; use one", ErrInvalidJob)
	}
	if o.expiresAt != nil && o.expiresIn != nil {
		return fmt.Errorf("%w: both ExpiresAt and ExpiresIn are given; use one", ErrInvalidJob)
	}
	return nil
}

// inheritSchedule takes the call's schedule and deadline (ownOptions) where
// the job's own options give none.
func (o *enqueueOpts) inheritSchedule() {
	if o.call == nil {
		return
	}
	if o.at == nil && o.delay == nil {
		o.at, o.delay = o.call.at, o.call.delay
	}
	if o.expiresAt == nil && o.expiresIn == nil {
		o.expiresAt, o.expiresIn = o.call.expiresAt, o.call.expiresIn
	}
}

// Type puts the job in the named queue (default "default"); workers claim
// the types they are configured for. At most 64 characters.
func Type(name string) EnqueueOption { return func(o *enqueueOpts) { o.typ = &name } }

// At schedules the job's first attempt no earlier than t (default now).
func At(t time.Time) EnqueueOption { return func(o *enqueueOpts) { o.at = &t } }

// Delay schedules the job's first attempt d from now.
func Delay(d time.Duration) EnqueueOption { return func(o *enqueueOpts) { o.delay = &d } }

// ExpiresAt gives the job a deadline: once t has passed it is not started
// any more and ends expired. It must not be before the job's scheduled time.
func ExpiresAt(t time.Time) EnqueueOption { return func(o *enqueueOpts) { o.expiresAt = &t } }

// ExpiresIn gives the job a deadline d from now (see ExpiresAt).
func ExpiresIn(d time.Duration) EnqueueOption { return func(o *enqueueOpts) { o.expiresIn = &d } }

// Policy sets the job's retry policy instead of the queue's.
func Policy(p RetryPolicy) EnqueueOption { return func(o *enqueueOpts) { o.policy = &p } }

// Limits of the table's columns (characters).
const (
	maxKindLen = jobtext.MaxKind
	maxTypeLen = jobtext.MaxType
)

// DefaultType is the type of a job enqueued without Type.
const DefaultType = "default"

// resolve checks the options against each other and returns the job's
// type, schedule, deadline and policy as of now.
func (q *Queue) resolve(opts []EnqueueOption, now time.Time) (typ string, at time.Time, expires *time.Time, p RetryPolicy, key *uniqueKey, err error) {
	var o enqueueOpts
	for _, fn := range opts {
		if fn != nil {
			fn(&o)
		}
	}
	typ = DefaultType
	if o.typ != nil {
		typ = *o.typ
	}
	if typ == "" {
		return "", at, nil, p, nil, fmt.Errorf("%w: the type is empty; leave Type out for %q", ErrInvalidJob, DefaultType)
	}
	if problem := typeProblem(typ); problem != "" {
		return "", at, nil, p, nil, fmt.Errorf("%w: %s", ErrInvalidJob, problem)
	}
	for _, layer := range []*enqueueOpts{o.call, &o} {
		if layer == nil {
			continue
		}
		if err := layer.checkOneSchedule(); err != nil {
			return "", at, nil, p, nil, err
		}
	}
	o.inheritSchedule()
	at = now
	switch {
	case o.at != nil:
		at = o.at.UTC()
	case o.delay != nil:
		at = now.Add(*o.delay)
	}
	switch {
	case o.expiresAt != nil:
		t := o.expiresAt.UTC()
		expires = &t
	case o.expiresIn != nil:
		t := now.Add(*o.expiresIn)
		expires = &t
	}
	if err := checkYear("scheduled time", at); err != nil {
		return "", at, nil, p, nil, err
	}
	if expires != nil {
		if err := checkYear("deadline", *expires); err != nil {
			return "", at, nil, p, nil, err
		}
	}
	if expires != nil && expires.Before(at) {
		return "", at, nil, p, nil, fmt.Errorf("%w: the deadline %s is before the scheduled time %s", ErrInvalidJob, expires.Format(time.RFC3339), at.Format(time.RFC3339))
	}
	p = q.policy
	if o.policy != nil {
		p = *o.policy
		if err := p.Validate(); err != nil {
			return "", at, nil, p, nil, err
		}
	}
	if key, err = resolveUnique(&o, now); err != nil {
		return "", at, nil, p, nil, err
	}
	return typ, at, expires, p, key, nil
}

// typeProblem says what is wrong with a type name, or "" when nothing is:
// the type column is VARCHAR(64), so a type is 1 to 64 characters
// (textProblem). Enqueue and WorkerConfig apply this one rule.
func typeProblem(typ string) string {
	if p := textProblem(typ, maxTypeLen); p != "" {
		return "the type " + p
	}
	return ""
}

// checkYear refuses a time outside the years 1 to 9999, which every engine
// stores alike: MySQL's DATETIME ends at 9999, and SQLite compares times as
// fixed-width text, so a five-digit year would sort before the present and
// the job would run at once. (Such a time is usually a unit mistake, like
// milliseconds given to time.Unix.)
func checkYear(what string, t time.Time) error {
	if y := t.Year(); y < 1 || y > 9999 {
		return fmt.Errorf("%w: the %s %s is outside the years 1 to 9999 that the table can store; check how the time is computed", ErrInvalidJob, what, t.Format(time.RFC3339))
	}
	return nil
}
