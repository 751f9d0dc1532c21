package migrations

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/jobqueue/jobqueue/internal/ddl"
	"github.com/jobqueue/jobqueue/internal/engine"
)

// Uninstall drops the jobs table named table and everything Install creates
// with it (its indexes and side tables), DELETING EVERY JOB IN IT; objects
// already missing are skipped, so it can run again, and a missing table's
// leftover side tables are dropped. It drops exactly what internal/ddl
// defines (the goose file's Down drops the same), whatever jobs the table
// holds, of version 2 or 1: check first that it is the table you mean. It
// is what `jobqueue bench` uses to start from a fresh table, and `jobqueue
// uninstall --force`. The engine is found as Install finds it (WithEngine
// names it). Given WithReport, it says whether the table existed and how
// many jobs of each status it deleted, counted under a lock that every
// enqueue waits for (as UninstallEmpty's), so the figure is exact.
//
// It refuses, dropping nothing, a table of the name that is not a jobqueue
// table, a view of the name, and a side table's name (<table>_<suffix>) held by a table that is
// not that side table (another queue's jobs table, say): both with an error
// wrapping ErrForeignTable. It refuses too, dropping nothing, while foreign
// keys of other tables reference the table or a side table (PostgreSQL and
// MySQL would refuse the drop; SQLite with foreign_keys on would run their
// ON DELETE actions on those tables' rows).
//
// On PostgreSQL and SQLite it runs in one transaction: when a drop fails
// (on PostgreSQL, say, because a view of yours depends on the table),
// nothing is dropped. On MySQL/MariaDB every DROP commits on its own: the
// tables go in one DROP TABLE statement after the checks above, which
// MySQL 8.0 runs all or nothing; MariaDB drops them one by one, so a
// failure there (a lost connection, a foreign key added meanwhile) can
// leave some of the side tables or the jobs table: run Uninstall again to
// drop what is left. A failed drop, and the refusal for foreign keys, are
// a *RunAgainError whose Step is "Uninstall".
func Uninstall(ctx context.Context, db *sql.DB, table string, opts ...Option) error {
	return uninstall(ctx, db, table, false, opts)
}

// uninstall is Uninstall, and with empty UninstallEmpty.
func uninstall(ctx context.Context, db *sql.DB, table string, empty bool, opts []Option) error {
	o, err := applyOptions(opts)
	if err != nil {
		return err
	}
	t, err := tableFor(db, table, opts)
	if err != nil {
		return err
	}
	var report *UninstallReport
	if empty || o.report != nil {
		report = &UninstallReport{}
	}
	err = runGoose(ctx, db, t.Kind, func(ctx context.Context, ex execQueryer) error {
		return dropTable(ctx, ex, t, empty, report)
	})
	var again *RunAgainError
	if errors.As(err, &again) {
		return again
	}
	if err != nil {
		// The one place that names the table: the errors of dropTable
		// say what failed (they named it too, and it read "uninstall
		// table jobs: uninstall table jobs: count its jobs: …").
		return fmt.Errorf("uninstall table %s: %w", t.Name, err)
	}
	if o.report != nil {
		*o.report = *report
	}
	return nil
}

// uninstallAgain is the error of an uninstall of t that failed with err,
// having left what left says: Uninstall is to run again once its cause is
// fixed.
func uninstallAgain(t engine.Table, err error, left, then string) *RunAgainError {
	return &RunAgainError{Step: "Uninstall", Table: t.Name, Err: err, what: "uninstall table " + t.Name, left: left, then: then}
}

// dropTable drops the jobs table t and its side objects through ex (goose's
// transaction on PostgreSQL and SQLite; on MySQL one session, as in
// ensureTable), under the table's lock, after the checks Uninstall
// describes (uninstallable). With a report to fill (UninstallEmpty always
// has one), it first locks the table against every write (lockWrites)
// and counts its jobs: with empty, it refuses, dropping nothing, when
// there are any. The count and the drops run under that one lock, so the
// count is what the drops delete; report is filled once they are done.
func dropTable(ctx context.Context, ex execQueryer, t engine.Table, empty bool, report *UninstallReport) error {
	return underTableLock(ctx, ex, t, func(ctx context.Context, ex execQueryer) (err error) {
		st, err := uninstallable(ctx, ex, t)
		if err != nil {
			return err
		}
		stmts := dropStatements(t)
		var counts []StatusCount
		if report != nil && st != tableMissing {
			var unlock func() error
			stmts, unlock, err = lockWrites(ctx, ex, t, stmts)
			if unlock != nil {
				defer func() {
					if uerr := unlock(); uerr != nil && err == nil {
						err = fmt.Errorf("unlock its tables: %w", uerr)
					}
				}()
			}
			if err != nil {
				return err
			}
			if counts, err = countJobs(ctx, ex, t); err != nil {
				return err
			}
			if empty && len(counts) > 0 {
				return &JobsHeldError{Table: t.Name, Counts: counts}
			}
		}
		left, then := "nothing was dropped (one transaction)", ""
		if t.Kind == engine.MySQL {
			left, then = "MySQL commits each DROP on its own, so some tables may be gone", " to drop what is left"
		}
		for _, s := range stmts {
			if _, err := ex.ExecContext(ctx, s); err != nil {
				// A write refused on a read-only connection says first
				// to connect to the primary, before the advice to run again.
				return uninstallAgain(t, fmt.Errorf("%s: %w", s, engine.ExplainReadOnly(err)), left, then)
			}
		}
		if report != nil {
			*report = UninstallReport{Table: t.Name, Missing: st == tableMissing, Counts: counts}
		}
		return nil
	})
}

// uninstallable returns the state of t, and why t and its side objects
// may not be dropped, or nil: the table is not a jobqueue table or is a
// view, a side object's name is held by something else
// (checkSideObjects), or another table's foreign key references one of
// the tables to drop.
func uninstallable(ctx context.Context, q queryer, t engine.Table) (tableState, error) {
	st, err := inspectOwn(ctx, q, t)
	if err != nil {
		return st, err
	}
	if err := refuseView(ctx, q, t, st); err != nil {
		return st, err
	}
	var refs []string
	for _, o := range ddl.Objects(t) {
		if o.Kind != ddl.JobsTable && o.Kind != ddl.SideTableKind {
			continue
		}
		r, err := referencingTables(ctx, q, o.Table)
		if err != nil {
			return st, err
		}
		for _, ref := range r {
			refs = append(refs, ref+" → "+o.Name)
		}
	}
	if len(refs) > 0 {
		return st, uninstallAgain(t, fmt.Errorf("foreign keys of other tables reference the tables to drop: %s; drop those foreign keys (or their tables) first",
			strings.Join(refs, ", ")), "nothing was dropped", "")
	}
	return st, nil
}

// dropStatements are the statements that drop t and its side objects, in
// the reverse order of their creation (ddl.Objects). On MySQL the tables
// go in one DROP TABLE, which MySQL 8.0 runs all or nothing (after any
// views, of which MySQL has none today).
func dropStatements(t engine.Table) []string {
	objs := ddl.Objects(t)
	var stmts, tables []string
	for i := len(objs) - 1; i >= 0; i-- {
		o := objs[i]
		switch {
		case o.Drop == "":
		case t.Kind == engine.MySQL && (o.Kind == ddl.JobsTable || o.Kind == ddl.SideTableKind):
			tables = append(tables, o.Table.Quoted())
		default:
			stmts = append(stmts, o.Drop)
		}
	}
	if len(tables) > 0 {
		stmts = append(stmts, "DROP TABLE IF EXISTS "+strings.Join(tables, ", "))
	}
	return stmts
}
