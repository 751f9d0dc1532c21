// Package ddl holds the one definition, per engine, of everything a jobqueue
// table consists of: the version 2 jobs table (SPEC section 2), its four
// indexes and its side tables (SPEC section 8). migrations.Install builds
// its statements from it, and so does the goose SQL file that
// `jobqueue goose-file` writes (migrations.GooseSQL), so the two cannot
// drift apart; the tests compare both with the engines' catalogs.
//
// # Adding a side table
//
// A side table holds state beside the jobs table (unique keys, the leader's
// lease, …) so that the jobs table keeps exactly the layout of SPEC section
// 2. To add one, append a SideTable to the list in SideTables (sidetables.go):
//
//	{
//		Suffix:  "unique", // the table is <jobs table>_unique
//		Columns: []string{"job_id", …}, // its columns, as Create makes them
//		Create: func(side engine.Table) []string {
//			switch side.Kind {
//			case engine.Postgres: return []string{`CREATE TABLE IF NOT EXISTS ` + side.Quoted() + ` (…)`}
//			case engine.MySQL:    return []string{"CREATE TABLE IF NOT EXISTS " + side.Quoted() + " (…) " + MySQLTableOptions}
//			default:              return []string{`CREATE TABLE IF NOT EXISTS ` + side.Quoted() + ` (…)`}
//			}
//		},
//	},
//
// That is all: Install and Migrate (which installs) create it on every run,
// GooseSQL puts it in the goose file's Up and drops it in Down, and test
// tables (internal/testdb) drop it at cleanup. The rules its statements
// must follow:
//   - every statement is idempotent (CREATE TABLE IF NOT EXISTS, and on
//     PostgreSQL and SQLite CREATE INDEX IF NOT EXISTS): Install runs them
//     on every deploy, inside its per-table lock;
//   - on MySQL put indexes inside the CREATE TABLE (MySQL 8.0 has no
//     CREATE INDEX IF NOT EXISTS) and end it with MySQLTableOptions;
//   - declare each index in Indexes and build it with SideIndex.Create
//     (PostgreSQL, SQLite) or SideIndex.Clause (inside MySQL's CREATE
//     TABLE): Install recreates a declared index that is missing or not
//     as declared, which CREATE … IF NOT EXISTS cannot;
//   - name indexes with IndexName(side, suffix), so that they stay within
//     PostgreSQL's 63 bytes;
//   - the suffix has at most MaxSideSuffix (7) characters: with the longest
//     table names engine.ParseTable allows (PostgreSQL 50, elsewhere 56),
//     <table>_<suffix>_pkey must fit in PostgreSQL's 63 bytes (it would cut
//     it silently) and <table>_<suffix> in MySQL's 64 (TestNamesFit checks
//     every name);
//   - a statement may contain semicolons (a trigger body): the goose file
//     wraps such statements in StatementBegin/StatementEnd;
//   - Columns lists exactly the columns the first statement creates (the
//     same names on every engine): a table of the side table's name with
//     other columns is another program's, which Install and Uninstall
//     refuse to touch. Should a later release add a column, the check
//     (schema.CheckSideObjects, which New runs too) must also accept the older set.
//
// Write the same table in sql/<engine>/schema.sql (with the jobs table
// called jobs) when sqlc-generated queries use it.
package ddl

import (
	"fmt"
	"strings"

	"github.com/jobqueue/jobqueue/internal/engine"
)

// MySQLTableOptions ends every MySQL CREATE TABLE of ours (SPEC section 2:
// InnoDB, utf8mb4; binary collation so that comparisons are exact).
const MySQLTableOptions = "ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin"

// MaxSideSuffix is the longest side-table suffix: a 50-character PostgreSQL
// table name + "_" + suffix + "_pkey" must fit in 63 bytes, and a
// 56-character MySQL one + "_" + suffix in 64 (engine.ParseTable's limits
// leave that room).
const MaxSideSuffix = engine.MaxSideSuffix

// Column is one column of the version 2 jobs table, with its type and
// constraints per engine, as in sql/<engine>/schema.sql.
type Column struct {
	Name                    string
	Postgres, MySQL, SQLite string
}

// Def is the column's type and constraints on engine k.
func (c Column) Def(k engine.Kind) string {
	switch k {
	case engine.Postgres:
		return c.Postgres
	case engine.MySQL:
		return c.MySQL
	default:
		return c.SQLite
	}
}

// Columns is the version 2 jobs table of SPEC section 2, in order.
func Columns() []Column {
	return []Column{
		{"id", "BIGSERIAL PRIMARY KEY", "BIGINT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY", "INTEGER PRIMARY KEY AUTOINCREMENT"},
		{"name", "VARCHAR(255) NOT NULL", "VARCHAR(255) NOT NULL", "VARCHAR(255) NOT NULL"},
		{"type", "VARCHAR(64) NOT NULL DEFAULT 'default'", "VARCHAR(64) NOT NULL DEFAULT 'default'", "VARCHAR(64) NOT NULL DEFAULT 'default'"},
		{"payload", "JSONB NOT NULL", "JSON NOT NULL", "TEXT NOT NULL"},
		{"status", "VARCHAR(20) NOT NULL DEFAULT 'pending'", StatusEnum() + " NOT NULL DEFAULT 'pending'", "VARCHAR(20) NOT NULL DEFAULT 'pending'"},
		{"attempts", "INT NOT NULL DEFAULT 0", "INT UNSIGNED NOT NULL DEFAULT 0", "INTEGER NOT NULL DEFAULT 0"},
		{"claim_token", "VARCHAR(64) NULL", "VARCHAR(64) NULL", "VARCHAR(64)"},
		{"lease_until", "TIMESTAMP NULL", "DATETIME NULL", "DATETIME"},
		{"max_attempts", "INT NOT NULL", "INT UNSIGNED NOT NULL", "INTEGER NOT NULL"},
		{"base_delay", "INT NOT NULL", "INT UNSIGNED NOT NULL", "INTEGER NOT NULL"},
		{"max_delay", "INT NOT NULL", "INT UNSIGNED NOT NULL", "INTEGER NOT NULL"},
		{"error", "TEXT NULL", "TEXT NULL", "TEXT"},
		{"scheduled_at", "TIMESTAMP NOT NULL", "DATETIME NOT NULL", "DATETIME NOT NULL"},
		{"expires_at", "TIMESTAMP NULL", "DATETIME NULL", "DATETIME"},
		{"finished_at", "TIMESTAMP NULL", "DATETIME NULL", "DATETIME"},
		{"created_at", "TIMESTAMP NOT NULL", "DATETIME NOT NULL", "DATETIME NOT NULL"},
	}
}

// Index is one of the four indexes of SPEC section 2; its name is
// Table.IndexName(Suffix).
type Index struct {
	Suffix  string
	Columns []string
}

// Indexes are the four indexes of the version 2 jobs table.
func Indexes() []Index {
	return []Index{
		{"status_scheduled", []string{"status", "scheduled_at", "id"}},
		{"type_status_scheduled", []string{"type", "status", "scheduled_at", "id"}},
		{"status_expires", []string{"status", "expires_at"}},
		{"lease_until", []string{"lease_until"}},
	}
}

// QuoteIdent quotes an identifier built from a checked table name.
func QuoteIdent(k engine.Kind, name string) string {
	if k == engine.MySQL {
		return "`" + name + "`"
	}
	return `"` + name + `"`
}

// CreateTable is the CREATE TABLE IF NOT EXISTS statement of the version 2
// jobs table t. On MySQL, withIndexes puts the four indexes in the same
// statement, so that the table appears complete at once; on PostgreSQL and
// SQLite indexes are separate statements (CreateIndex) and withIndexes
// changes nothing.
func CreateTable(t engine.Table, withIndexes bool) string {
	var b strings.Builder
	b.WriteString("CREATE TABLE IF NOT EXISTS " + t.Quoted() + " (\n")
	for i, c := range Columns() {
		if i > 0 {
			b.WriteString(",\n")
		}
		fmt.Fprintf(&b, "    %s %s", c.Name, c.Def(t.Kind))
	}
	if t.Kind == engine.MySQL && withIndexes {
		for _, ix := range Indexes() {
			fmt.Fprintf(&b, ",\n    INDEX %s (%s)", QuoteIdent(t.Kind, t.IndexName(ix.Suffix)), strings.Join(ix.Columns, ", "))
		}
	}
	b.WriteString("\n)")
	if t.Kind == engine.MySQL {
		b.WriteString(" " + MySQLTableOptions)
	}
	return b.String()
}

// CreateIndex is the statement creating index ix of the jobs table t:
// CREATE INDEX IF NOT EXISTS on PostgreSQL and SQLite; on MySQL, which has
// no IF NOT EXISTS for indexes (MariaDB has, MySQL 8.0 not), an ALTER TABLE
// … ADD INDEX that fails when the index exists (the caller checks the
// catalog first).
func CreateIndex(t engine.Table, ix Index) string {
	name := QuoteIdent(t.Kind, t.IndexName(ix.Suffix))
	cols := strings.Join(ix.Columns, ", ")
	if t.Kind == engine.MySQL {
		return "ALTER TABLE " + t.Quoted() + " ADD INDEX " + name + " (" + cols + ")"
	}
	return "CREATE INDEX IF NOT EXISTS " + name + " ON " + t.Quoted() + " (" + cols + ")"
}

// IndexName is the name of an index of a side table: the same rule as the
// jobs table's (Table.IndexName): idx_<side>_<suffix> cut to 63 bytes on
// PostgreSQL, idx_<suffix> on MySQL.
func IndexName(side engine.Table, suffix string) string { return side.IndexName(suffix) }

// DropTable is the statement dropping table t if it exists (its indexes go
// with it).
func DropTable(t engine.Table) string { return "DROP TABLE IF EXISTS " + t.Quoted() }
