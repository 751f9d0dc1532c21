// Package engine names the three database engines jobqueue supports, detects
// which one a *sql.DB talks to, and checks and quotes table names for each.
// It holds the error values that the public packages re-export, so that
// errors.Is works whichever package returned them.
package engine

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"
)

// Kind is one of the database engines jobqueue supports.
type Kind string

// The supported engines. MySQL covers MariaDB as well.
const (
	Postgres Kind = "postgres"
	MySQL    Kind = "mysql"
	SQLite   Kind = "sqlite"
)

// Errors shared by the public packages (re-exported there).
var (
	// ErrUnsupportedDatabase is returned for a *sql.DB whose driver is not
	// pgx's stdlib, go-sql-driver/mysql or modernc.org/sqlite, nor a
	// wrapper in which one of them can be found (see Detect and Choose).
	ErrUnsupportedDatabase = errors.New("jobqueue: unsupported database")
	// ErrInvalidTableName is returned for a table name that does not match
	// [a-zA-Z_][a-zA-Z0-9_]* (or is too long for the engine).
	ErrInvalidTableName = errors.New("jobqueue: invalid table name")
	// ErrOutdatedTable is returned for a version 1 table or one whose
	// migration was interrupted; migrations.Migrate converts it.
	ErrOutdatedTable = errors.New("jobqueue: outdated table")
	// ErrTableMissing is returned for a jobs table that does not exist;
	// migrations.Install creates it.
	ErrTableMissing = errors.New("jobqueue: table missing")
	// ErrForeignTable is returned for a table of the name that exists but
	// is not a jobqueue table (none of its layouts' columns); nothing is
	// done to it.
	ErrForeignTable = errors.New("jobqueue: foreign table")
	// ErrSideNameTaken wraps ErrForeignTable for the name of one of a jobs
	// table's side tables (<table>_<suffix>) held by a table or view that
	// is not that side table (another queue's jobs table, say); nothing is
	// done to it. The error names the object.
	ErrSideNameTaken = fmt.Errorf("%w: a side table's name is taken", ErrForeignTable)
	// ErrViewName wraps ErrForeignTable for a jobs table's name held by a
	// view, which Install, Migrate and Uninstall refuse (the error says
	// so) even when its columns are a jobs table's.
	ErrViewName = fmt.Errorf("%w: the name is a view's", ErrForeignTable)
)

// Kinds returns every supported engine, a new slice each call (the
// list is no package variable that a caller could change for all).
func Kinds() []Kind { return []Kind{Postgres, MySQL, SQLite} }

// ParseKind reads an engine's name as a user gives it: "postgres" (or
// "postgresql"), "mysql" (or "mariadb"), "sqlite" (or "sqlite3"), in any
// case; anything else is ErrUnsupportedDatabase.
func ParseKind(name string) (Kind, error) {
	switch strings.ToLower(name) {
	case "postgres", "postgresql":
		return Postgres, nil
	case "mysql", "mariadb":
		return MySQL, nil
	case "sqlite", "sqlite3":
		return SQLite, nil
	}
	return "", fmt.Errorf("%w: engine %q; use postgres, mysql (also for MariaDB) or sqlite", ErrUnsupportedDatabase, name)
}

// maxPostgresTableName is the longest table name PostgreSQL accepts: with 51
// characters or more, idx_<table>_type_status_scheduled and
// idx_<table>_status_scheduled cut to 63 bytes would be the same name.
const maxPostgresTableName = 50

// MaxSideSuffix is the longest suffix of a side table's name,
// <table>_<suffix> (internal/ddl): the name limits below leave room for it.
const MaxSideSuffix = 7

// maxTableName is the longest table name on MySQL and SQLite: MySQL allows
// 64 characters for any identifier, and the side tables' names
// (<table>_<suffix>) must fit too; SQLite has no limit, but the same bound
// keeps tables portable. (PostgreSQL's 50 leaves room for
// <table>_<suffix>_pkey within its 63 bytes.)
const maxTableName = 64 - 1 - MaxSideSuffix

var tableNameRE = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)

// Table is a checked table name for one engine.
type Table struct {
	// Kind is the engine the name was checked for.
	Kind Kind
	// Name is the name as the engine stores it (lower case on PostgreSQL).
	Name string
}

// ParseTable checks name for engine k before any SQL runs: it must match
// [a-zA-Z_][a-zA-Z0-9_]*; on PostgreSQL it is folded to lower case and must
// be shorter than 51 characters, elsewhere shorter than 57. On SQLite,
// which reserves the names that start with sqlite_, it must not be sqlite
// nor start with sqlite_ (in any case: its side tables would be
// sqlite_<suffix>).
func ParseTable(k Kind, name string) (Table, error) {
	if !tableNameRE.MatchString(name) {
		return Table{}, fmt.Errorf("%w: %q; use letters, digits and underscores, not starting with a digit", ErrInvalidTableName, name)
	}
	switch k {
	case Postgres:
		if len(name) > maxPostgresTableName {
			return Table{}, fmt.Errorf("%w: %q has %d characters; PostgreSQL allows at most %d, so that the index names cut to 63 bytes stay distinct", ErrInvalidTableName, name, len(name), maxPostgresTableName)
		}
		return Table{Kind: k, Name: strings.ToLower(name)}, nil
	case MySQL, SQLite:
		if k == SQLite && strings.HasPrefix(strings.ToLower(name+"_"), "sqlite_") {
			return Table{}, fmt.Errorf("%w: %q; SQLite reserves the names that start with sqlite_ (its own tables'), and the side tables are <table>_<suffix>: choose another name", ErrInvalidTableName, name)
		}
		if len(name) > maxTableName {
			return Table{}, fmt.Errorf("%w: %q has %d characters; at most %d are allowed, so that its side tables' names (<table>_<suffix>) stay within MySQL's 64", ErrInvalidTableName, name, len(name), maxTableName)
		}
		return Table{Kind: k, Name: name}, nil
	default:
		return Table{}, fmt.Errorf("%w: engine %q", ErrUnsupportedDatabase, k)
	}
}

// Quoted is the table name quoted for use in SQL.
func (t Table) Quoted() string {
	if t.Kind == MySQL {
		return "`" + t.Name + "`"
	}
	return `"` + t.Name + `"`
}

// IndexName is the name of one of our indexes, from its suffix (for example
// "status_scheduled"): idx_<table>_<suffix> on PostgreSQL (cut to 63 bytes)
// and SQLite, idx_<suffix> on MySQL, where index names are per table.
func (t Table) IndexName(suffix string) string {
	switch t.Kind {
	case MySQL:
		return "idx_" + suffix
	case Postgres:
		n := "idx_" + t.Name + "_" + suffix
		if len(n) > 63 {
			n = n[:63]
		}
		return n
	default:
		return "idx_" + t.Name + "_" + suffix
	}
}

// Time formats in which times are sent to MySQL and SQLite: always UTC, with
// no offset. MySQL's DATETIME keeps whole seconds (sending the fraction would
// make the server round it up); SQLite keeps text, so every time written must
// have the same fixed-width form for comparisons to be right.
const (
	MySQLTimeFormat  = "2006-01-02 15:04:05"
	SQLiteTimeFormat = "2006-01-02 15:04:05.000000"
)

// TimeArg is t as a query argument for engine k: a UTC time.Time for
// PostgreSQL (TIMESTAMP without time zone), a UTC string for MySQL and SQLite
// (see MySQLTimeFormat and SQLiteTimeFormat), so that the session's or the
// driver's time zone never shifts it.
func (k Kind) TimeArg(t time.Time) any {
	t = t.UTC()
	switch k {
	case MySQL:
		return t.Format(MySQLTimeFormat)
	case SQLite:
		return t.Format(SQLiteTimeFormat)
	default:
		return t
	}
}

// AsUTC reads a time that the database returned as a UTC wall clock,
// whatever location the driver gave it (go-sql-driver/mysql uses its loc
// setting): the wall clock is kept and the location set to UTC.
func AsUTC(t time.Time) time.Time {
	y, mo, d := t.Date()
	h, mi, s := t.Clock()
	return time.Date(y, mo, d, h, mi, s, t.Nanosecond(), time.UTC)
}
