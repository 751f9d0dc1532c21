package ddl

import "github.com/jobqueue/jobqueue/internal/engine"

// SideTable is a table that holds state beside a jobs table (SPEC section
// 8), named <jobs table>_<Suffix>. See the package doc for how to add one.
type SideTable struct {
	// Suffix names the table: <jobs table>_<Suffix>; lower case letters,
	// digits and underscores, at most MaxSideSuffix characters.
	Suffix string
	// Create returns the statements that create the side table side (on
	// side.Kind, its name quoted by side.Quoted()) and its indexes, in
	// order. Each must be idempotent; the first creates the table.
	Create func(side engine.Table) []string
}

// SideTables are the side tables every jobs table has, in creation order.
// Append new ones at the end (see the package doc).
func SideTables() []SideTable {
	return []SideTable{uniqueTable, leaderTable}
}

// uniqueTable is <table>_unique, the unique keys of jobs (queue.UniqueKey,
// SPEC section 8): one row per job enqueued with a key, job_id its job.
// live_key is the key while the row holds it and NULL once another job
// took the key over; its unique index is the constraint that lets one job
// hold a key at a time. unique_key keeps the key for Retry. held_until is
// when UniqueFor's period ends (the enqueue time without one).
var uniqueTable = SideTable{
	Suffix: "unique",
	Create: func(side engine.Table) []string {
		live := QuoteIdent(side.Kind, IndexName(side, "live_key"))
		switch side.Kind {
		case engine.Postgres:
			return []string{
				`CREATE TABLE IF NOT EXISTS ` + side.Quoted() + ` (
    job_id     BIGINT       PRIMARY KEY,
    unique_key VARCHAR(255) NOT NULL,
    live_key   VARCHAR(255) NULL,
    held_until TIMESTAMP    NOT NULL
)`,
				`CREATE UNIQUE INDEX IF NOT EXISTS ` + live + ` ON ` + side.Quoted() + ` (live_key)`,
			}
		case engine.MySQL:
			return []string{"CREATE TABLE IF NOT EXISTS " + side.Quoted() + ` (
    job_id     BIGINT UNSIGNED NOT NULL PRIMARY KEY,
    unique_key VARCHAR(255)    NOT NULL,
    live_key   VARCHAR(255)    NULL,
    held_until DATETIME        NOT NULL,
    UNIQUE INDEX ` + live + ` (live_key)
) ` + MySQLTableOptions}
		default:
			return []string{
				`CREATE TABLE IF NOT EXISTS ` + side.Quoted() + ` (
    job_id     INTEGER      PRIMARY KEY,
    unique_key VARCHAR(255) NOT NULL,
    live_key   VARCHAR(255),
    held_until DATETIME     NOT NULL
)`,
				`CREATE UNIQUE INDEX IF NOT EXISTS ` + live + ` ON ` + side.Quoted() + ` (live_key)`,
			}
		}
	},
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
// compares leases against one clock (queue/leader.go).
var leaderTable = SideTable{
	Suffix: "leader",
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
