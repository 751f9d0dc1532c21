package migrations

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/jobqueue/jobqueue/internal/ddl"
	"github.com/jobqueue/jobqueue/internal/engine"
)

// UninstallEmpty is Uninstall for a table that must hold no jobs: it drops
// what Uninstall drops only when the table holds no job, and otherwise
// drops nothing and returns a *JobsHeldError (wrapping ErrTableHoldsJobs)
// that counts them. The count and the drops run under one lock that every
// enqueue waits for, so a job enqueued meanwhile is never dropped: its
// transaction ends first and the count sees it, or it waits and fails
// once the table is gone. The lock is, on PostgreSQL, LOCK TABLE … IN
// ACCESS EXCLUSIVE MODE in Uninstall's transaction; on MySQL/MariaDB,
// LOCK TABLES … WRITE on the table and its side tables, released after
// the drop; on SQLite, the database's write lock, taken before the count.
// A missing table's leftovers are dropped as by Uninstall. `jobqueue
// uninstall` without --force calls it.
func UninstallEmpty(ctx context.Context, db *sql.DB, table string, opts ...Option) error {
	return uninstall(ctx, db, table, true, opts)
}

// JobsHeldError is UninstallEmpty's refusal of a table that holds jobs;
// nothing was dropped. errors.Is(err, ErrTableHoldsJobs) holds for it.
type JobsHeldError struct {
	// Table is the table's name.
	Table string
	// Counts are the jobs per status, in the order of a job's life
	// (pending, in_progress, completed, failed, expired, as
	// queue.Statuses; any other status after them), statuses without
	// jobs left out.
	Counts []StatusCount
}

// StatusCount is how many jobs of one status a table holds.
type StatusCount struct {
	// Status is the jobs' status.
	Status string
	// Jobs is how many jobs have it.
	Jobs int64
}

// String is, say, "2 pending".
func (c StatusCount) String() string { return fmt.Sprintf("%d %s", c.Jobs, c.Status) }

// Total is the number of jobs the table holds.
func (e *JobsHeldError) Total() int64 { return totalJobs(e.Counts) }

// Summary is the counts joined, say "2 pending, 1 failed".
func (e *JobsHeldError) Summary() string { return summary(e.Counts) }

// totalJobs is the number of jobs counts counts.
func totalJobs(counts []StatusCount) int64 {
	var n int64
	for _, c := range counts {
		n += c.Jobs
	}
	return n
}

// summary is counts joined, say "2 pending, 1 failed" ("" for none).
func summary(counts []StatusCount) string {
	parts := make([]string, len(counts))
	for i, c := range counts {
		parts[i] = c.String()
	}
	return strings.Join(parts, ", ")
}

// Error says what the table holds and what to do.
func (e *JobsHeldError) Error() string {
	return fmt.Sprintf("jobqueue: table %s holds %d job(s) (%s), so nothing was dropped: stop the workers and producers that use it and let them finish, or drop it with its jobs (Uninstall)",
		e.Table, e.Total(), e.Summary())
}

// Is makes errors.Is(err, ErrTableHoldsJobs) true.
func (e *JobsHeldError) Is(target error) bool { return target == ErrTableHoldsJobs }

// lockWrites locks the existing jobs table t (whose drop statements are
// stmts) against every write until the drops are done, so that a count
// of its jobs (countJobs) taken under it is what the drops delete. It
// returns the statements to run under the lock (on MySQL, a DROP TABLE of
// the locked tables only: a table not named by LOCK TABLES may not be
// named at all), and the lock's release (nil when none is needed: the
// transaction's end releases it).
func lockWrites(ctx context.Context, ex execQueryer, t engine.Table, stmts []string) ([]string, func() error, error) {
	var unlock func() error
	switch t.Kind {
	case engine.Postgres:
		if _, err := ex.ExecContext(ctx, "LOCK TABLE "+t.Quoted()+" IN ACCESS EXCLUSIVE MODE"); err != nil {
			return nil, nil, lockFailed(t, "lock it", err)
		}
	case engine.MySQL:
		tables, err := existingTables(ctx, ex, t)
		if err != nil {
			return nil, nil, err
		}
		locks := make([]string, len(tables))
		for i, tb := range tables {
			locks[i] = tb + " WRITE"
		}
		if _, err := ex.ExecContext(ctx, "LOCK TABLES "+strings.Join(locks, ", ")); err != nil {
			return nil, nil, lockFailed(t, "lock its tables", err)
		}
		unlock = func() error {
			_, err := ex.ExecContext(context.WithoutCancel(ctx), "UNLOCK TABLES")
			return err
		}
		stmts = []string{"DROP TABLE " + strings.Join(tables, ", ")}
	case engine.SQLite:
		// A write that changes nothing takes the database's write lock
		// (as BEGIN IMMEDIATE would) before the count.
		if _, err := ex.ExecContext(ctx, "DELETE FROM "+t.Quoted()+" WHERE 1 = 0"); err != nil {
			return nil, nil, lockFailed(t, "take the write lock", err)
		}
	}
	return stmts, unlock, nil
}

// lockFailed is the error of lockWrites when its lock statement (what
// says what it was for) failed with err: nothing was dropped, and the
// uninstall can run again once the cause is fixed (a read-only
// connection's refusal says first to connect to the primary).
func lockFailed(t engine.Table, what string, err error) *RunAgainError {
	return uninstallAgain(t, fmt.Errorf("%s: %w", what, engine.ExplainReadOnly(err)), "nothing was dropped", "")
}

// existingTables are the quoted names of the tables of t (the jobs table
// and its side tables) that exist, the jobs table first.
func existingTables(ctx context.Context, q queryer, t engine.Table) ([]string, error) {
	var out []string
	for _, o := range ddl.Objects(t) {
		if o.Kind != ddl.JobsTable && o.Kind != ddl.SideTableKind {
			continue
		}
		kind, err := relationKind(ctx, q, o.Table)
		if err != nil {
			return nil, fmt.Errorf("look up %s: %w", o.Name, err)
		}
		if kind == "table" {
			out = append(out, o.Table.Quoted())
		}
	}
	return out, nil
}

// statusRank is the place of status in a job's life (ddl.Statuses), in
// which JobsHeldError lists the counts; false for a status of no
// jobqueue version.
func statusRank(status string) (int, bool) {
	i := slices.Index(ddl.Statuses(), status)
	return i, i >= 0
}

// countJobs counts the jobs of t per status, in the order of
// JobsHeldError's Counts; none (nil) for an empty table.
func countJobs(ctx context.Context, q queryer, t engine.Table) ([]StatusCount, error) {
	rows, err := q.QueryContext(ctx, "SELECT status, COUNT(*) FROM "+t.Quoted()+" GROUP BY status")
	if err != nil {
		return nil, fmt.Errorf("count its jobs: %w", err)
	}
	defer rows.Close()
	var counts []StatusCount
	for rows.Next() {
		var st sql.NullString
		var c StatusCount
		if err := rows.Scan(&st, &c.Jobs); err != nil {
			return nil, fmt.Errorf("count its jobs: %w", err)
		}
		c.Status = st.String
		if !st.Valid {
			c.Status = "NULL"
		}
		counts = append(counts, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("count its jobs: %w", err)
	}
	sort.Slice(counts, func(i, j int) bool {
		oi, iKnown := statusRank(counts[i].Status)
		oj, jKnown := statusRank(counts[j].Status)
		switch {
		case iKnown && jKnown:
			return oi < oj
		case iKnown != jKnown:
			return iKnown
		}
		return counts[i].Status < counts[j].Status
	})
	return counts, nil
}
