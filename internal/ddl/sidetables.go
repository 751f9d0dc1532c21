package ddl

import (
	"strings"

	"github.com/jobqueue/jobqueue/internal/engine"
)

// SideTable is a table that holds state beside a jobs table (SPEC section
// 8), named <jobs table>_<Suffix>. See the package doc for how to add one.
type SideTable struct {
	// Suffix names the table: <jobs table>_<Suffix>; lower case letters,
	// digits and underscores, at most MaxSideSuffix characters.
	Suffix string
	// Columns are the names of the table's columns, in lower case, the
	// same on every engine: Install, Migrate, Check and Uninstall take a
	// table of the name for this side table only when it has exactly
	// these columns, and refuse any other (ErrForeignTable) rather than
	// use or drop it.
	Columns []string
	// Create returns the statements that create the side table side (on
	// side.Kind, its name quoted by side.Quoted()) and its indexes, in
	// order. Each must be idempotent; the first creates the table.
	Create func(side engine.Table) []string
	// NamesJobs is true when the side table's rows name jobs of the jobs
	// table by id: rows left by a jobs table dropped by hand would name
	// the jobs of a new table of that name (which restarts its ids), so
	// Install refuses to create the jobs table beside them.
	NamesJobs bool
	// Indexes are the side table's indexes besides its primary key, which
	// Create makes (with SideIndex.Create, or SideIndex.Clause inside the
	// CREATE TABLE on MySQL). Install recreates one that is missing or not
	// as declared: on MySQL, where the CREATE TABLE IF NOT EXISTS holds
	// them, a dropped one would otherwise stay missing.
	Indexes []SideIndex
	// Views returns the views over the side table and the jobs table jobs
	// (on jobs.Kind), each created after the side table's statements and
	// dropped before it; nil when the engine needs none.
	Views func(jobs engine.Table) []View
}

// SideIndex is an index of a side table, named IndexName(side, Suffix).
type SideIndex struct {
	// Suffix names the index (see IndexName).
	Suffix string
	// Columns are the indexed columns, in order.
	Columns []string
	// Unique is true for a unique index.
	Unique bool
}

// Clause is the index as a clause of MySQL's CREATE TABLE or ALTER TABLE
// … ADD: [UNIQUE] INDEX `name` (columns).
func (ix SideIndex) Clause(side engine.Table) string {
	return ix.kind() + "INDEX " + QuoteIdent(side.Kind, IndexName(side, ix.Suffix)) + " (" + strings.Join(ix.Columns, ", ") + ")"
}

// Create is the statement creating the index on the side table side on
// PostgreSQL and SQLite: CREATE [UNIQUE] INDEX IF NOT EXISTS.
func (ix SideIndex) Create(side engine.Table) string {
	return "CREATE " + ix.kind() + "INDEX IF NOT EXISTS " + QuoteIdent(side.Kind, IndexName(side, ix.Suffix)) +
		" ON " + side.Quoted() + " (" + strings.Join(ix.Columns, ", ") + ")"
}

// kind is "UNIQUE " for a unique index, "" otherwise.
func (ix SideIndex) kind() string {
	if ix.Unique {
		return "UNIQUE "
	}
	return ""
}

// View is a view of a side table (with the triggers that make it
// writable), named <jobs table>_<Suffix>.
type View struct {
	// Suffix names the view like a side table's (at most MaxSideSuffix
	// characters, unique among side tables and views).
	Suffix string
	// Columns are the names of the view's columns, in lower case (see
	// SideTable.Columns).
	Columns []string
	// Create returns the idempotent statements that create the view view
	// and then its triggers.
	Create []string
}

// SideTables are the side tables every jobs table has, in creation order.
// Append new ones at the end (see the package doc).
func SideTables() []SideTable {
	return []SideTable{uniqueTable, leaderTable}
}

// SideSuffixes are the suffixes of every side table and view, on any
// engine: the names, jobs_<suffix>, that the generated queries may use.
func SideSuffixes() []string {
	var out []string
	for _, st := range SideTables() {
		out = append(out, st.Suffix)
		for _, k := range engine.Kinds() {
			if st.Views == nil {
				break
			}
			for _, v := range st.Views(engine.Table{Kind: k, Name: "jobs"}) {
				out = append(out, v.Suffix)
			}
		}
	}
	return out
}

// uniqueTable is <table>_unique, the unique keys of jobs (queue.UniqueKey,
// SPEC section 8): one row per job enqueued with a key, job_id its job.
// live_key is the key while the row holds it and NULL once another job
// took the key over; its unique index is the constraint that lets one job
// hold a key at a time. unique_key keeps the key for Retry. held_until is
// when UniqueFor's period ends (the enqueue time without one).
var uniqueTable = SideTable{
	Suffix:    "unique",
	Columns:   []string{"job_id", "unique_key", "live_key", "held_until"},
	NamesJobs: true,
	Indexes:   []SideIndex{uniqueLiveKey},
	Create: func(side engine.Table) []string {
		switch side.Kind {
		case engine.Postgres:
			return []string{
				`CREATE TABLE IF NOT EXISTS ` + side.Quoted() + ` (
    job_id     BIGINT       PRIMARY KEY,
    unique_key VARCHAR(255) NOT NULL,
    live_key   VARCHAR(255) NULL,
    held_until TIMESTAMP    NOT NULL
)`,
				uniqueLiveKey.Create(side),
			}
		case engine.MySQL:
			return []string{"CREATE TABLE IF NOT EXISTS " + side.Quoted() + ` (
    job_id     BIGINT UNSIGNED NOT NULL PRIMARY KEY,
    unique_key VARCHAR(255)    NOT NULL,
    live_key   VARCHAR(255)    NULL,
    held_until DATETIME        NOT NULL,
    ` + uniqueLiveKey.Clause(side) + `
) ` + MySQLTableOptions}
		default:
			return []string{
				`CREATE TABLE IF NOT EXISTS ` + side.Quoted() + ` (
    job_id     INTEGER      PRIMARY KEY,
    unique_key VARCHAR(255) NOT NULL,
    live_key   VARCHAR(255),
    held_until DATETIME     NOT NULL
)`,
				uniqueLiveKey.Create(side),
			}
		}
	},
	Views: func(jobs engine.Table) []View {
		if jobs.Kind != engine.SQLite {
			return nil
		}
		return []View{keyedView(jobs)}
	},
}

// uniqueLiveKey is the unique index on <table>_unique's live_key: the
// constraint that lets one job hold a key at a time.
var uniqueLiveKey = SideIndex{Suffix: "live_key", Columns: []string{"live_key"}, Unique: true}

// keyedView is <table>_keyed on SQLite: inserting a row into it inserts
// a pending job and its key row in one statement (its INSTEAD OF trigger),
// so that a keyed enqueue of a free key is one autocommit statement, as a
// plain enqueue is, instead of a transaction of four. The key row's
// insert has no conflict clause: when another row holds the key, the
// unique index fails the whole statement and nothing stays written. The
// view's columns are what the insert gives; reading it lists the jobs with
// a key row.
func keyedView(jobs engine.Table) View {
	side := Side(jobs, "unique")
	view := Side(jobs, "keyed")
	trigger := QuoteIdent(jobs.Kind, view.Name+"_insert")
	return View{Suffix: "keyed", Columns: []string{"name", "type", "payload", "max_attempts", "base_delay", "max_delay",
		"scheduled_at", "expires_at", "created_at", "unique_key", "held_until"}, Create: []string{
		`CREATE VIEW IF NOT EXISTS ` + view.Quoted() + ` AS
SELECT j.name, j.type, j.payload, j.max_attempts, j.base_delay, j.max_delay,
       j.scheduled_at, j.expires_at, j.created_at, u.unique_key, u.held_until
FROM ` + jobs.Quoted() + ` AS j JOIN ` + side.Quoted() + ` AS u ON u.job_id = j.id`,
		`CREATE TRIGGER IF NOT EXISTS ` + trigger + ` INSTEAD OF INSERT ON ` + view.Quoted() + `
BEGIN
    INSERT INTO ` + jobs.Quoted() + ` (name, type, payload, status, attempts, max_attempts, base_delay,
                      max_delay, scheduled_at, expires_at, created_at)
    VALUES (NEW.name, NEW.type, NEW.payload, 'pending', 0, NEW.max_attempts, NEW.base_delay,
            NEW.max_delay, NEW.scheduled_at, NEW.expires_at, NEW.created_at);
    INSERT INTO ` + side.Quoted() + ` (job_id, unique_key, live_key, held_until)
    VALUES (last_insert_rowid(), NEW.unique_key, NEW.unique_key, NEW.held_until);
END`,
	}}
}

// Side is the side table with suffix of the jobs table t, on t's engine.
// t is checked (engine.ParseTable), so the name is too: its length is what
// TestNamesFit guards.
func Side(t engine.Table, suffix string) engine.Table {
	return engine.Table{Kind: t.Kind, Name: t.Name + "_" + suffix}
}

// leaderTable is <table>_leader: one row per role that one process of all
// those using the table holds at a time (the worker's "maintenance" role:
// maintenance and periodic jobs, SPEC section 9), with its holder, a term
// counting changes of holder, and its lease. Its times are the database
// server's clock (UTC), with fractions of a second, so that every process
// compares leases against one clock (queue/leader.go). renewals counts
// the changes of a role's row: takeovers and renewals; no reader shows it.
// Each role has a second row, its fence row, named fence:<role>, holding
// the holder and term whose acts may land: takeovers write it, and each
// act of the leader locks it (on MySQL writes it, renewals + 1), while
// renewals write only the role's row (queue/fence.go). It also holds a
// row per periodic job, named tick:<digest>, whose term is the last tick
// the leaders enqueued, in Unix nanoseconds (queue/periodic.go).
var leaderTable = SideTable{
	Suffix:  "leader",
	Columns: []string{"name", "holder", "term", "renewals", "since", "renewed_at", "lease_until"},
	Create: func(side engine.Table) []string {
		switch side.Kind {
		case engine.Postgres:
			return []string{`CREATE TABLE IF NOT EXISTS ` + side.Quoted() + ` (
    name        VARCHAR(64)  PRIMARY KEY,
    holder      VARCHAR(255) NOT NULL,
    term        BIGINT       NOT NULL,
    renewals    BIGINT       NOT NULL,
    since       TIMESTAMP    NOT NULL,
    renewed_at  TIMESTAMP    NOT NULL,
    lease_until TIMESTAMP    NOT NULL
)`}
		case engine.MySQL:
			return []string{"CREATE TABLE IF NOT EXISTS " + side.Quoted() + ` (
    name        VARCHAR(64)  NOT NULL PRIMARY KEY,
    holder      VARCHAR(255) NOT NULL,
    term        BIGINT       NOT NULL,
    renewals    BIGINT       NOT NULL,
    since       DATETIME(6)  NOT NULL,
    renewed_at  DATETIME(6)  NOT NULL,
    lease_until DATETIME(6)  NOT NULL
) ` + MySQLTableOptions}
		default:
			return []string{`CREATE TABLE IF NOT EXISTS ` + side.Quoted() + ` (
    name        VARCHAR(64)  PRIMARY KEY NOT NULL,
    holder      VARCHAR(255) NOT NULL,
    term        INTEGER      NOT NULL,
    renewals    INTEGER      NOT NULL,
    since       DATETIME     NOT NULL,
    renewed_at  DATETIME     NOT NULL,
    lease_until DATETIME     NOT NULL
)`}
		}
	},
}
