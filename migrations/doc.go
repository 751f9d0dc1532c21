// Package migrations installs and upgrades the jobqueue table.
//
// Install creates the version 2 table of the chosen name (SPEC section 2)
// when it is missing, creates any of its four indexes that are missing and
// rebuilds any whose columns differ (or that is not a plain, valid B-tree
// index); it is idempotent and meant to run on
// every deploy. It refuses a version 1 or half-migrated table with an error
// wrapping ErrOutdatedTable: Migrate converts such a table once.
//
// Check tells, changing nothing, whether the queue can use a table: it
// refuses the same version 1 and half-migrated tables as Install.
//
// Install and Migrate run through goose Go migrations built for the chosen table, so a
// service that already runs its own migrations with goose can include ours
// in its own `goose up` (see GooseMigrations). A team that runs the goose
// command over SQL files commits the file GooseSQL returns instead (`jobqueue
// goose-file` writes it): it creates what Install creates, from the same
// definitions.
//
// The engine (PostgreSQL, MySQL/MariaDB or SQLite) is detected from the
// *sql.DB's driver: pgx's stdlib, go-sql-driver/mysql or modernc.org/sqlite,
// also under a wrapper that keeps the driver in a field (otelsql, sqlhooks
// and the like); WithEngine names it where detection cannot see through the
// wrapper.
package migrations

import (
	"errors"
	"time"

	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/policy"
)

// Errors returned by this package; they are the same values as those of
// package queue, so errors.Is works with either.
var (
	// ErrInvalidTableName is returned, before any SQL runs, for a table
	// name that does not match [a-zA-Z_][a-zA-Z0-9_]* or is too long (on
	// PostgreSQL 51 characters or more, elsewhere 57 or more, which leaves
	// room for the side tables' names), and on SQLite for sqlite and
	// names that start with sqlite_, which SQLite reserves.
	ErrInvalidTableName = engine.ErrInvalidTableName
	// ErrUnsupportedDatabase is returned for a *sql.DB whose driver is not
	// pgx's stdlib, go-sql-driver/mysql or modernc.org/sqlite (nor a
	// wrapper of one of them that is detected or named with WithEngine).
	ErrUnsupportedDatabase = engine.ErrUnsupportedDatabase
	// ErrOutdatedTable is returned by Install for a version 1 table or one
	// whose migration was interrupted; Migrate converts it.
	ErrOutdatedTable = engine.ErrOutdatedTable
	// ErrTableMissing is returned by Check for a table that does not
	// exist; Install creates it. It is queue.ErrTableMissing.
	ErrTableMissing = engine.ErrTableMissing
	// ErrForeignTable is returned by Install, Check, Migrate and Uninstall
	// for a table of the name that is not a jobqueue table, and for a side
	// table's name (<table>_<suffix>) held by a table that is not that
	// side table (another queue's jobs table, say); none of them changes
	// it, nor creates or drops anything else. Install, Migrate and
	// Uninstall return it too for a view under the table's name, even a
	// view of a jobs table.
	ErrForeignTable = engine.ErrForeignTable
	// ErrSideNameTaken wraps ErrForeignTable for the second case: a side
	// table's name held by something else. The error names it.
	ErrSideNameTaken = engine.ErrSideNameTaken
	// ErrTableHoldsJobs is wrapped by UninstallEmpty's error (a
	// *JobsHeldError) for a table that holds jobs; nothing was dropped.
	ErrTableHoldsJobs = errors.New("jobqueue: table holds jobs")
	// ErrInvalidPolicy is returned, before any SQL runs, by Migrate and
	// GooseMigrations for a retry policy that is not valid (see
	// RetryPolicy) or whose numbers do not fit the table's INT columns.
	ErrInvalidPolicy = policy.ErrInvalidPolicy
)

// RetryPolicy is the retry policy Migrate stores with every job of a
// version 1 table (version 1 kept none). Its fields are those of
// queue.RetryPolicy, so one converts to the other:
// migrations.RetryPolicy(p).
type RetryPolicy struct {
	// MaxAttempts is the number of attempts, the first one included.
	MaxAttempts int
	// BaseDelay is the wait after the first failed attempt (whole seconds);
	// each later failure doubles it.
	BaseDelay time.Duration
	// MaxDelay caps the wait between attempts (whole seconds).
	MaxDelay time.Duration
}

// internal is p as the internal/policy package (shared with the queue)
// takes it.
func (p RetryPolicy) internal() policy.RetryPolicy { return policy.RetryPolicy(p) }
