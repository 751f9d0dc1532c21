package main

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/jobqueue/jobqueue/internal/duration"
	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/jobtext"
	"github.com/jobqueue/jobqueue/queue"
)

func (a *app) enqueueCommand() *cobra.Command {
	var (
		name, typ, payload, at, expiresAt string
		delay, expiresIn                  string
		uniqueKey, uniqueFor              string
		maxAttempts, baseDelay, maxDelay  int
	)
	cmd := &cobra.Command{
		Use:   "enqueue --name KIND [--type T] [--payload JSON|-|@FILE] [--at RFC3339 | --delay DUR] [--expires-at RFC3339 | --expires-in DUR] [--max-attempts N --base-delay S --max-delay S] [--unique-key KEY [--unique-for DUR]]",
		Short: "Add a job and print its id",
		Long: `enqueue adds one job to the table and prints its id.

The job runs in the queue --type (default "default") as soon as possible, or
at --at (RFC 3339, e.g. 2030-01-02T15:04:05Z) or after --delay (e.g. 90s,
15m, 2h, 1d). With --expires-at or --expires-in it expires, unrun, when its
deadline passes; a deadline before the job may run is refused. Times are
in the years 1 to 9999. Its retry policy is the queue default (3 attempts, base
delay 60 s, max delay 3600 s) unless all three of --max-attempts,
--base-delay and --max-delay (seconds) are given.

With --unique-key the job is enqueued only if no job with the same key is
pending or running (or, with --unique-for, was enqueued less than DUR ago
and still exists): otherwise nothing is written, the existing job's id is
printed, "duplicate of ID" goes to stderr, and the exit status is 0.

The payload is --payload's JSON ({} without it); as with curl, --payload -
(or @-) reads it from stdin and --payload @FILE from the file FILE. No JSON
value starts with @ or is a lone -, so a literal is never taken for them: a
JSON string starting with @ keeps its quotes, --payload '"@home"'. An
empty or unreadable input, one that is not a JSON value, or one larger
than 15 MiB (what every engine stores with its default settings), is
refused before anything is written.`,
		Example: `  jobqueue enqueue --name send_email --type email --payload '{"to":"a@example.com"}'
  jobqueue enqueue --name import --payload @order.json
  generate-order | jobqueue enqueue --name import --payload -
  jobqueue enqueue --name report --delay 1h --expires-in 2h
  jobqueue enqueue --name nightly_report --unique-key report:2030-01-02 --unique-for 24h`,
		Args: flagsOnly,
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			if name == "" {
				return usagef("--name is empty; give the job's kind, e.g. --name send_email")
			}
			if typ == "" {
				return usagef("--type is empty; leave it out for the type \"default\"")
			}
			// The queue's own checks of a job's kind and type, here so
			// that they are told as the flags' whether or not the
			// database answers.
			if p := jobtext.Problem(name, jobtext.MaxKind); p != "" {
				return usagef("--name %s", p)
			}
			if p := jobtext.Problem(typ, jobtext.MaxType); p != "" {
				return usagef("--type %s", p)
			}
			set := cmd.Flags().Changed
			for _, pair := range [][3]string{{"at", "delay", "when the job may run"}, {"expires-at", "expires-in", "when the job expires"}} {
				if set(pair[0]) && set(pair[1]) {
					return usagef("--%s and --%s both say %s; give one of them", pair[0], pair[1], pair[2])
				}
			}
			var given, missing []string
			for _, f := range []string{"max-attempts", "base-delay", "max-delay"} {
				if set(f) {
					given = append(given, "--"+f)
				} else {
					missing = append(missing, "--"+f)
				}
			}
			if len(given) > 0 && len(missing) > 0 {
				return usagef("a retry policy needs all three of --max-attempts, --base-delay and --max-delay (missing %s), or none of them for the queue's default", strings.Join(missing, ", "))
			}
			opts := []queue.EnqueueOption{}
			if set("type") {
				opts = append(opts, queue.Type(typ))
			}
			// When the job may first run and when it expires, as of now,
			// with the flags that say so, for the check below.
			now := time.Now()
			start, startFlag := now, ""
			switch {
			case set("at"):
				t, err := parseTime("--at", at)
				if err != nil {
					return err
				}
				opts = append(opts, queue.At(t))
				start, startFlag = t, "--at "+at
			case set("delay"):
				d, err := parseDuration("--delay", delay)
				if err != nil {
					return err
				}
				opts = append(opts, queue.Delay(d))
				start, startFlag = now.Add(d), "--delay "+delay+" from now"
			}
			var deadline time.Time
			deadlineFlag := ""
			switch {
			case set("expires-at"):
				t, err := parseTime("--expires-at", expiresAt)
				if err != nil {
					return err
				}
				opts = append(opts, queue.ExpiresAt(t))
				deadline, deadlineFlag = t, "--expires-at "+expiresAt
			case set("expires-in"):
				d, err := parseDuration("--expires-in", expiresIn)
				if err != nil {
					return err
				}
				if d <= 0 {
					return usagef("--expires-in %s must be positive", expiresIn)
				}
				opts = append(opts, queue.ExpiresIn(d))
				deadline, deadlineFlag = now.Add(d), "--expires-in "+expiresIn
			}
			// The queue refuses a deadline before the job's scheduled
			// time (ErrInvalidJob); told here in the flags' words, before
			// the database is opened.
			if deadlineFlag != "" && deadline.Before(start) {
				if startFlag == "" {
					return usagef("%s has passed: the job would expire unrun; give a time to come, or leave the flag out", deadlineFlag)
				}
				return usagef("%s is before the job may run (%s): it would expire unrun; give a later deadline or an earlier start", deadlineFlag, startFlag)
			}
			if set("unique-for") && !set("unique-key") {
				return usagef("--unique-for needs --unique-key; give the key the period keeps taken")
			}
			if set("unique-key") {
				// Checked here, before the database is opened, so that a
				// bad key is told as such whether or not it answers.
				if uniqueKey == "" {
					return usagef("--unique-key is empty; give a key of 1 to %d characters, or leave the flag out", jobtext.MaxUniqueKey)
				}
				if p := jobtext.Problem(uniqueKey, jobtext.MaxUniqueKey); p != "" {
					return usagef("--unique-key %s", p)
				}
				opts = append(opts, queue.UniqueKey(uniqueKey))
			}
			if set("unique-for") {
				d, err := parseDuration("--unique-for", uniqueFor)
				if err != nil {
					return err
				}
				opts = append(opts, queue.UniqueFor(d))
			}
			if len(given) > 0 {
				p, err := policyFromFlags(maxAttempts, baseDelay, maxDelay)
				if err != nil {
					return err
				}
				opts = append(opts, queue.Policy(p))
			}
			// Last of the checks, so that a payload from stdin is read
			// only once every flag is known to be good.
			ctx := cmd.Context()
			raw, err := a.readPayload(ctx, payload)
			if err != nil {
				return err
			}
			// The queue's rule for the engine of the URL, told before
			// connecting; a bad URL is told by withQueue.
			if _, _, k, err := engine.DriverDSN(a.dbURL); err == nil {
				if p := jobtext.PayloadProblem(k, raw); p != "" {
					arg := payload // - or @FILE in full, a literal shortened
					if arg != "-" && !strings.HasPrefix(arg, "@") {
						arg = shorten(arg, 40)
					}
					return usagef("--payload %s: the payload %s; remove the NUL characters from it", tableCell(arg), p)
				}
			}
			return a.withQueue(ctx, func(q *queue.Queue) error {
				id, err := q.Enqueue(ctx, queue.RawArgs{Name: name, Payload: raw}, opts...)
				if errors.Is(err, queue.ErrDuplicate) {
					if _, err := fmt.Fprintln(a.out, id); err != nil {
						return fmt.Errorf("duplicate of %d: job %d holds the unique key %q, so nothing was enqueued, but its id could not be printed: %w", id, id, uniqueKey, err)
					}
					fmt.Fprintf(a.err, "duplicate of %d: job %d holds the unique key %q; nothing was enqueued\n", id, id, uniqueKey)
					return nil
				}
				if errors.Is(err, queue.ErrInvalidJob) || errors.Is(err, queue.ErrPayloadRejected) || errors.Is(err, queue.ErrInvalidPolicy) {
					return &usageError{err: err}
				}
				if err != nil {
					return err
				}
				// The id is the command's only output: a script that
				// cannot read it must not carry on as if it could.
				if _, err := fmt.Fprintln(a.out, id); err != nil {
					return fmt.Errorf("job %d was enqueued but its id could not be printed: %w", id, err)
				}
				return nil
			})
		}),
	}
	f := cmd.Flags()
	f.StringVar(&name, "name", "", "the job's kind, which picks its handler (required)")
	f.StringVar(&typ, "type", "default", "the queue the job belongs to")
	f.StringVar(&payload, "payload", "{}", "the job's payload: JSON, - to read it from stdin, or @FILE to read it from FILE")
	f.StringVar(&at, "at", "", "run no earlier than this time (RFC 3339)")
	f.StringVar(&delay, "delay", "", "run no earlier than this long from now (e.g. 30s, 15m, 2h, 1d)")
	f.StringVar(&expiresAt, "expires-at", "", "expire the job unrun at this time (RFC 3339)")
	f.StringVar(&expiresIn, "expires-in", "", "expire the job unrun this long from now")
	f.IntVar(&maxAttempts, "max-attempts", 0, "attempts, the first included (with --base-delay and --max-delay)")
	f.IntVar(&baseDelay, "base-delay", 0, "seconds to wait after the first failed attempt; doubles after each")
	f.IntVar(&maxDelay, "max-delay", 0, "longest wait between attempts, in seconds")
	f.StringVar(&uniqueKey, "unique-key", "", "enqueue only if no pending or running job has this key (1 to 255 characters)")
	f.StringVar(&uniqueFor, "unique-for", "", "keep the key taken this long after the enqueue, finished or not (with --unique-key)")
	cmd.MarkFlagRequired("name")
	return cmd
}

// policyFromFlags is the retry policy of --max-attempts, --base-delay and
// --max-delay (seconds). Each number is checked against what the table's INT
// columns hold before it becomes a time.Duration, which a larger one would
// overflow, and to be at least 1; a bad one is a usage error that names
// the flag.
func policyFromFlags(maxAttempts, baseDelay, maxDelay int) (queue.RetryPolicy, error) {
	for _, f := range []struct {
		flag string
		n    int
	}{{"--max-attempts", maxAttempts}, {"--base-delay", baseDelay}, {"--max-delay", maxDelay}} {
		if f.n > math.MaxInt32 {
			return queue.RetryPolicy{}, usagef("%s %d is too large; the table holds at most %d", f.flag, f.n, math.MaxInt32)
		}
		if f.n < 1 {
			// In the flags' words, not the Go API's (MaxAttempts is 0).
			return queue.RetryPolicy{}, usagef("invalid retry policy: %s is %d; it must be at least 1", f.flag, f.n)
		}
	}
	p := queue.RetryPolicy{
		MaxAttempts: maxAttempts,
		BaseDelay:   time.Duration(baseDelay) * time.Second,
		MaxDelay:    time.Duration(maxDelay) * time.Second,
	}
	if err := p.Validate(); err != nil {
		return queue.RetryPolicy{}, &usageError{err: err}
	}
	return p, nil
}

// parseTime reads an RFC 3339 time given to flag (a usage error if bad, or
// outside the years 1 to 9999 that the queue stores, once in UTC).
func parseTime(flag, s string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, usagef("%s %q is not an RFC 3339 time; write it like 2030-01-02T15:04:05Z", flag, s)
	}
	t = t.UTC()
	if y := t.Year(); y < 1 || y > 9999 {
		return time.Time{}, usagef("%s %s is outside the years 1 to 9999 that the table can store (in UTC); give a time in them", flag, s)
	}
	return t, nil
}

// parseDuration reads a Go duration given to flag (90s, 15m, 2h45m), also
// accepting whole days (7d) (a usage error if bad or negative): the rule
// of internal/duration, which the dashboard's prune follows too.
func parseDuration(flag, s string) (time.Duration, error) {
	d, err := duration.Parse(s)
	switch {
	case errors.Is(err, duration.ErrTooLong):
		return 0, usagef("%s %s is too long; the longest is %dd", flag, s, duration.MaxDays)
	case errors.Is(err, duration.ErrNegative):
		return 0, usagef("%s %s must not be negative", flag, s)
	case err != nil:
		return 0, usagef("%s %q is not a duration; write it like 90s, 15m, 2h or 7d", flag, s)
	}
	return d, nil
}
