package queue

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jobqueue/jobqueue/internal/engine"
)

// store is the thin adapter between the queue's rules and one engine's
// generated queries. It only moves values in and out; every decision about a
// job's life is made in the queue (enqueue.go, attempt.go, outcome.go,
// ops.go).
type store interface {
	// probe checks that the table exists and has the version 2 columns.
	probe(ctx context.Context) error
	// insert writes one job and returns its id.
	insert(ctx context.Context, d dbtx, j *newJob, now time.Time) (int64, error)
	// insertMany writes jobs in multi-row statements; d is a transaction.
	insertMany(ctx context.Context, d dbtx, jobs []*newJob, now time.Time) error
	// claim marks up to max due jobs after the position after in
	// (scheduled_at, id) order in_progress, each with the claim token
	// attemptToken(token, id) and lease_until, and returns them as they
	// are now.
	claim(ctx context.Context, types []string, max int, token string, now, leaseUntil time.Time, after claimPos) ([]*JobRow, error)
	// extend moves the lease of the attempts that still hold their job and
	// returns the ids of those.
	extend(ctx context.Context, refs []attemptRef, leaseUntil time.Time) (map[int64]bool, error)
	// extendSkipLocked is extend that leaves alone, rather than waits for,
	// the rows another transaction holds locked (SQLite, which locks no
	// rows, waits as always); their ids are not returned either.
	extendSkipLocked(ctx context.Context, refs []attemptRef, leaseUntil time.Time) (map[int64]bool, error)
	// complete marks the attempts that still hold their job completed (or
	// deletes their rows) and returns their ids. With skipLocked it leaves
	// alone, rather than waits for, the rows another transaction holds
	// locked (SQLite, which locks no rows, waits as always); their ids are
	// not returned either.
	complete(ctx context.Context, refs []attemptRef, now time.Time, del, skipLocked bool) (map[int64]bool, error)
	// heldAttempts reads the jobs that refs (no id twice) still hold.
	heldAttempts(ctx context.Context, refs []attemptRef) ([]*JobRow, error)
	// abandoned reads at most limit abandoned attempts: in_progress jobs
	// whose lease ended before now.
	// d is the pool or a leader's act (leaderAct), as for expire.
	abandoned(ctx context.Context, d dbtx, now time.Time, limit int) ([]*JobRow, error)
	// endAttempts writes e to the jobs that refs (no id twice) still hold
	// and returns their ids.
	endAttempts(ctx context.Context, refs []attemptRef, e attemptEnd) (map[int64]bool, error)
	// unclaim makes the jobs that refs (no id twice) still hold pending
	// again as before their claim (attempts - 1, scheduled_at and error
	// kept) and returns their ids: attempts that never started.
	unclaim(ctx context.Context, refs []attemptRef) (map[int64]bool, error)
	// endAbandoned writes e to the jobs that refs (no id twice) still hold
	// with a lease that ended before now, and returns how many.
	endAbandoned(ctx context.Context, d dbtx, refs []attemptRef, e attemptEnd, now time.Time) (int64, error)
	// fail writes the end of a failed attempt if it still holds its job.
	fail(ctx context.Context, ref attemptRef, e attemptEnd) (bool, error)
	stats(ctx context.Context, typ string) (map[Status]int64, error)
	// list returns the jobs matching f with ids below beforeID, newest
	// first, at most limit (f is validated; its AfterID and Limit are not
	// read).
	list(ctx context.Context, f ListFilter, beforeID int64, limit int) ([]*JobRow, error)
	// listWindow returns the jobs of kind f.Name (and f.Status when set;
	// f.Type is not read) with ids from floorID to below beforeID, newest
	// first, at most limit: a range scan of the primary key that examines
	// no id outside the window.
	listWindow(ctx context.Context, f ListFilter, floorID, beforeID int64, limit int) ([]*JobRow, error)
	// idBelow returns the largest id below beforeID, and false when there
	// is none.
	idBelow(ctx context.Context, beforeID int64) (int64, bool, error)
	// get returns nil, nil for a missing id.
	get(ctx context.Context, id int64) (*JobRow, error)
	// expire marks at most max overdue pending jobs expired (one
	// statement). d is the pool (the statement is then its own short
	// transaction) or the transaction of a leader's act (leaderAct).
	expire(ctx context.Context, d dbtx, now time.Time, max int) (int64, error)
	// prune deletes at most batch finished jobs older than cutoff (one
	// statement); d as for expire.
	prune(ctx context.Context, d dbtx, cutoff time.Time, batch int) (int64, error)
	purge(ctx context.Context) (int64, error)
	// cancel ends the pending and in_progress jobs among ids (distinct,
	// positive) with outcome o, clearing their claim tokens, and returns
	// the ids it changed, the status of the others that exist, and the
	// attempts it ended (the jobs among them that were in_progress), each
	// with the lease_until its row held when the statement changed it.
	cancel(ctx context.Context, ids []int64, o attemptEnd) (map[int64]bool, map[int64]Status, []cancelledRun, error)
	// deleteJobs deletes the jobs among ids that are not in_progress and
	// returns the ids it deleted and the status of the others that exist.
	deleteJobs(ctx context.Context, ids []int64) (map[int64]bool, map[int64]Status, error)

	// Unique keys (unique.go), in the side table <table>_unique. d may be
	// a transaction; where a method locks, the lock lasts until it ends.

	// probeUnique checks on d that the side table exists.
	probeUnique(ctx context.Context, d dbtx) error
	// insertUnique writes job j holding key k; false (and nothing written)
	// when another job holds the key. On MySQL and SQLite d is a
	// transaction.
	insertUnique(ctx context.Context, d dbtx, j *newJob, k uniqueKey, now time.Time) (int64, bool, error)
	// keyHolder returns the key row holding key (found false: none), read
	// so that it is the latest committed one; lock locks it.
	keyHolder(ctx context.Context, d dbtx, key string, lock bool) (holder keyRow, found bool, err error)
	// holderStatus returns the status of job id ("" when it is gone);
	// lock locks its row against changes.
	holderStatus(ctx context.Context, d dbtx, id int64, lock bool) (Status, error)
	// freeKey lets the key of job id go.
	freeKey(ctx context.Context, d dbtx, id int64) error
	// jobKey returns the key row of job id, locked (found false: the job
	// has no key).
	jobKey(ctx context.Context, d dbtx, id int64) (k keyRow, found bool, err error)
	// retakeKey makes job id hold its key again.
	retakeKey(ctx context.Context, d dbtx, id int64) error
	// deleteKeys deletes the key rows of jobs.
	deleteKeys(ctx context.Context, ids []int64) error
	// keyWindow reads the window of at most max key rows after job_id
	// after, in job_id order: how many rows it holds and its last job_id
	// (0: none). d as for expire.
	keyWindow(ctx context.Context, d dbtx, after int64, max int) (seen int, last int64, err error)
	// deleteOrphanKeys deletes the key rows with job_id in (after, last]
	// whose job is gone, and returns how many. d as for expire.
	deleteOrphanKeys(ctx context.Context, d dbtx, after, last int64) (int64, error)
	// retryCandidate reads the status and deadline of job id on d,
	// locking its row until d's transaction ends (found false: no such
	// job).
	retryCandidate(ctx context.Context, d dbtx, id int64) (st Status, expiresAt *time.Time, found bool, err error)
	// retryIn writes w, Retry's decision at now, to job id on d, fenced
	// by the status it was read with; false when that status changed.
	retryIn(ctx context.Context, d dbtx, id int64, w retryWrite, now time.Time) (bool, error)

	// The leadership of a role, in the side table <table>_leader
	// (leader.go), timed by the database server's clock.
	// leaderEnsure creates the role's row, held by nobody, if missing.
	leaderEnsure(ctx context.Context, role string) error
	// leaderAcquire takes the role for holder when its lease has passed,
	// or renews it when holder holds it, until the server's now + lease;
	// it reports whether holder holds it now. A takeover (a new term) also
	// moves the role's fence row on, in the same transaction, waiting for
	// the acts in flight; a renewal in the same term waits for none
	// (acquireLeader, leader_takeover.go).
	leaderAcquire(ctx context.Context, role, holder string, lease time.Duration) (bool, error)
	// leaderRelease ends holder's lease now, if holder holds it.
	leaderRelease(ctx context.Context, role, holder string) error
	// leaderFence is the first statement of a leader's act, on d, its
	// transaction (leaderAct): it reports whether holder still holds the
	// role in term with a lease that has not passed by the server's clock,
	// and then keeps a takeover waiting until the transaction ends (a lock
	// on the role's fence row; SQLite: the write lock), but not the
	// holder's renewal. On PostgreSQL the server ends the session if the
	// transaction sits idle for idle. It returns the server's time as the
	// statement read it too (dbNow, UTC), which bounds the periodic tick
	// an act enqueues (periodic_clock.go).
	leaderFence(ctx context.Context, d dbtx, role, holder string, term int64, idle time.Duration) (ok bool, dbNow time.Time, err error)
	// periodicLastTick reads, on d (a leader's act), the last tick
	// recorded in row (found false when none).
	periodicLastTick(ctx context.Context, d dbtx, row string) (r tickRecord, found bool, err error)
	// periodicSetLastTick records, on d, r as the last tick in row (of
	// the periodic job named periodic), in place of the one recorded.
	periodicSetLastTick(ctx context.Context, d dbtx, row, periodic string, r tickRecord) error
	// leaderGet reads the role's row (nil, nil when it has none).
	leaderGet(ctx context.Context, role string) (*leaderRow, error)
	// analyze refreshes the planner's statistics where the engine needs it
	// (PostgreSQL); it is a no-op elsewhere.
	analyze(ctx context.Context) error
}

// leaderRow is the row of a role in <table>_leader, with the server's time
// when it was read. Times are UTC.
type leaderRow struct {
	holder                       string
	term                         int64
	since, renewedAt, leaseUntil time.Time
	dbNow                        time.Time
}

// tickRecord is the last tick of a periodic job recorded in the leader
// side table (enqueueTickOnce), in Unix nanoseconds: tick, and next, the
// tick after it by the schedule of the leader that enqueued it (0:
// unknown, recorded by an older version or past what nanoseconds hold).
type tickRecord struct{ tick, next int64 }

// newJob is a validated job, ready to be written.
type newJob struct {
	name        string
	typ         string
	payload     []byte
	maxAttempts int64
	baseDelay   int64
	maxDelay    int64
	scheduledAt time.Time
	expiresAt   *time.Time
}

// jsonRow is one job in the JSON array that the PostgreSQL and SQLite bulk
// inserts read (InsertJobsJSON). The payload travels as a string holding
// the JSON text, so it arrives byte for byte.
type jsonRow struct {
	Name        string  `json:"name"`
	Type        string  `json:"type"`
	Payload     string  `json:"payload"`
	MaxAttempts int64   `json:"max_attempts"`
	BaseDelay   int64   `json:"base_delay"`
	MaxDelay    int64   `json:"max_delay"`
	ScheduledAt string  `json:"scheduled_at"`
	ExpiresAt   *string `json:"expires_at"`
	Ord         int     `json:"ord"`
}

// Bulk insert chunks: at most this many jobs or bytes per statement.
const (
	maxChunkJobs  = 5000
	maxChunkBytes = 4 << 20
)

// jsonChunks encodes jobs as JSON arrays of jsonRow, each within the chunk
// limits, with times in layout.
func jsonChunks(jobs []*newJob, layout string) ([]string, error) {
	var chunks []string
	var b strings.Builder
	n := 0
	flush := func() {
		if n > 0 {
			b.WriteByte(']')
			chunks = append(chunks, b.String())
			b.Reset()
			n = 0
		}
	}
	for i, j := range jobs {
		r := jsonRow{
			Name: j.name, Type: j.typ, Payload: string(j.payload),
			MaxAttempts: j.maxAttempts, BaseDelay: j.baseDelay, MaxDelay: j.maxDelay,
			ScheduledAt: j.scheduledAt.UTC().Format(layout), Ord: i,
		}
		if j.expiresAt != nil {
			s := j.expiresAt.UTC().Format(layout)
			r.ExpiresAt = &s
		}
		enc, err := json.Marshal(r)
		if err != nil {
			return nil, fmt.Errorf("%w: job %d: %v", ErrPayloadRejected, i, err)
		}
		if n > 0 && (n >= maxChunkJobs || b.Len()+len(enc) > maxChunkBytes) {
			flush()
		}
		if n == 0 {
			b.WriteByte('[')
		} else {
			b.WriteByte(',')
		}
		b.Write(enc)
		n++
	}
	flush()
	return chunks, nil
}

// padIDs pads ids (and tokens, when given) to the next power of two by
// repeating the last element, so that a query with an IN list (sqlc.slice)
// has one of a few texts, each prepared once, instead of one per length.
// Repeated elements change nothing in an IN list.
func padIDs[T any](xs []T) []T {
	n := 1
	for n < len(xs) {
		n *= 2
	}
	if n == len(xs) || len(xs) == 0 {
		return xs
	}
	out := make([]T, n)
	copy(out, xs)
	for i := len(xs); i < n; i++ {
		out[i] = xs[len(xs)-1]
	}
	return out
}

// maxListLen bounds the ids of one batched statement (heartbeat, complete).
const maxListLen = 1024

// chunkRefs splits refs into batches of at most maxListLen in which no id
// appears twice (two attempts of one job, an old and a current one, go to
// different statements, so that a statement's result tells them apart).
func chunkRefs(refs []attemptRef) [][]attemptRef {
	if len(refs) <= maxListLen && distinctIDs(refs) {
		// The common case (a completer's batch): one chunk, refs itself.
		return [][]attemptRef{refs}
	}
	var out [][]attemptRef
	var seen []map[int64]bool
next:
	for _, r := range refs {
		for i := range out {
			if len(out[i]) < maxListLen && !seen[i][r.ID] {
				out[i] = append(out[i], r)
				seen[i][r.ID] = true
				continue next
			}
		}
		out = append(out, []attemptRef{r})
		seen = append(seen, map[int64]bool{r.ID: true})
	}
	return out
}

// distinctIDs reports whether no id appears twice in refs. It sorts a copy
// of the ids rather than filling a map (one small allocation per batch).
func distinctIDs(refs []attemptRef) bool {
	if len(refs) < 2 {
		return true
	}
	ids := make([]int64, len(refs))
	for i, r := range refs {
		ids[i] = r.ID
	}
	slices.Sort(ids)
	for i := 1; i < len(ids); i++ {
		if ids[i] == ids[i-1] {
			return false
		}
	}
	return true
}

// refLists returns the ids and tokens of refs.
func refLists(refs []attemptRef) ([]int64, []string) {
	ids := make([]int64, len(refs))
	toks := make([]string, len(refs))
	for i, r := range refs {
		ids[i], toks[i] = r.ID, r.Token
	}
	return ids, toks
}

// untokened reports whether refs, the attempts of one EndAbandonedAttempts
// statement, are one job whose claim_token is NULL (read as ""): the
// statement then matches that job with no token (Queue.reclaim ends each
// such job in a statement of its own, as it does any token that does not
// name its job).
func untokened(refs []attemptRef) bool { return len(refs) == 1 && refs[0].Token == "" }

// jsonList encodes a list as a JSON array (for the PostgreSQL and SQLite
// queries that take lists).
func jsonList[T any](xs []T) string {
	b, _ := json.Marshal(xs)
	return string(b)
}

// claimFilter is the type filter of SQLite's claim statement (ClaimJobs):
// one type in one, several as a JSON array in many, and neither for every
// type. PostgreSQL has a claim statement per filter (pgClaimFor).
func claimFilter(types []string) (one, many sql.NullString) {
	switch len(types) {
	case 0:
	case 1:
		one = sql.NullString{String: types[0], Valid: true}
	default:
		many = sql.NullString{String: jsonList(types), Valid: true}
	}
	return one, many
}

// recorder is a DBTX that runs nothing: it records the text and arguments
// of the generated statement sent to it, so that the statement can be
// turned into a multi-row one (expandValues).
type recorder struct {
	query string
	args  []any
}

type noResult struct{}

func (noResult) LastInsertId() (int64, error) { return 0, nil }
func (noResult) RowsAffected() (int64, error) { return 0, nil }

var errRecorderOnlyExec = errors.New("jobqueue: internal: recorder runs only Exec")

func (r *recorder) ExecContext(_ context.Context, query string, args ...any) (sql.Result, error) {
	r.query, r.args = query, args
	return noResult{}, nil
}

func (r *recorder) PrepareContext(context.Context, string) (*sql.Stmt, error) {
	return nil, errRecorderOnlyExec
}

func (r *recorder) QueryContext(context.Context, string, ...any) (*sql.Rows, error) {
	return nil, errRecorderOnlyExec
}

func (r *recorder) QueryRowContext(context.Context, string, ...any) *sql.Row { return nil }

// expandValues turns a generated single-row INSERT … VALUES (…) with ?
// placeholders into the same statement with rows tuples.
func expandValues(query string, rows int) (string, error) {
	upper := strings.ToUpper(query)
	at := strings.Index(upper, "VALUES")
	if at < 0 {
		return "", fmt.Errorf("jobqueue: internal: no VALUES in %q", query)
	}
	open := strings.IndexByte(query[at:], '(')
	if open < 0 {
		return "", fmt.Errorf("jobqueue: internal: no tuple in %q", query)
	}
	open += at
	depth, end := 0, -1
	inStr := false
	for i := open; i < len(query) && end < 0; i++ {
		switch c := query[i]; {
		case inStr:
			if c == '\'' {
				inStr = false
			}
		case c == '\'':
			inStr = true
		case c == '(':
			depth++
		case c == ')':
			depth--
			if depth == 0 {
				end = i + 1
			}
		}
	}
	if end < 0 {
		return "", fmt.Errorf("jobqueue: internal: unbalanced tuple in %q", query)
	}
	tuple := query[open:end]
	var b strings.Builder
	b.Grow(len(query) + (rows-1)*(len(tuple)+2))
	b.WriteString(query[:open])
	for i := 0; i < rows; i++ {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(tuple)
	}
	b.WriteString(query[end:])
	return b.String(), nil
}

// nullTime is t as a sql.NullTime (invalid for nil).
func nullTime(t *time.Time) sql.NullTime {
	if t == nil {
		return sql.NullTime{}
	}
	return sql.NullTime{Time: *t, Valid: true}
}

// timePtr reads a nullable time as a UTC *time.Time.
func timePtr(t sql.NullTime) *time.Time {
	if !t.Valid {
		return nil
	}
	u := engine.AsUTC(t.Time)
	return &u
}

func nullString(s string) sql.NullString {
	return sql.NullString{String: s, Valid: s != ""}
}
