package engine

// Detecting the engine of a *sql.DB, also when its driver is wrapped by an
// instrumentation package (github.com/XSAM/otelsql, sqlhooks, sqlmw and the
// like): such a wrapper keeps the driver it wraps in a field of its own
// driver type, so Detect looks through the driver's fields, as deep as
// maxWrapDepth, for one of the three drivers. It only reads types (never an
// unexported value), sends nothing to the server, and names the option to
// pass when it finds nothing (Choose takes that option's engine). PgxConn
// finds pgx's connection under a wrapper's, for what only pgx can do.

import (
	"database/sql"
	"database/sql/driver"
	"fmt"
	"reflect"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/stdlib"
	"modernc.org/sqlite"
)

// maxWrapDepth bounds how many wrappers, one inside the other, Detect looks
// through.
const maxWrapDepth = 8

// knownDrivers are the driver types of the three engines, as registered
// (pointers) and, for go-sql-driver/mysql whose methods take the value, as a
// value too.
var knownDrivers = map[reflect.Type]Kind{
	reflect.TypeFor[*stdlib.Driver]():     Postgres,
	reflect.TypeFor[*mysql.MySQLDriver](): MySQL,
	reflect.TypeFor[mysql.MySQLDriver]():  MySQL,
	reflect.TypeFor[*sqlite.Driver]():     SQLite,
}

var driverInterface = reflect.TypeFor[driver.Driver]()

// Detect tells which engine db talks to, from its driver: pgx's stdlib,
// go-sql-driver/mysql or modernc.org/sqlite, or a wrapper (otelsql,
// sqlhooks and the like) that holds one of them in a field. Any other
// driver is ErrUnsupportedDatabase, with an error that says to name the
// engine explicitly when the driver wraps one of the three.
func Detect(db *sql.DB) (Kind, error) {
	if db == nil {
		return "", fmt.Errorf("%w: the *sql.DB is nil", ErrUnsupportedDatabase)
	}
	d := db.Driver()
	if k, ok := driverKind(reflect.ValueOf(d), maxWrapDepth); ok {
		return k, nil
	}
	return "", fmt.Errorf("%w: driver %T is not pgx's stdlib (github.com/jackc/pgx/v5/stdlib, driver \"pgx\"), github.com/go-sql-driver/mysql (\"mysql\") or modernc.org/sqlite (\"sqlite\"), and none of them was found inside it; if it wraps one of them (otelsql, sqlhooks and the like), name the engine with queue.WithEngine or migrations.WithEngine (\"postgres\", \"mysql\" or \"sqlite\")", ErrUnsupportedDatabase, d)
}

// Choose is the engine of db: given when it is set (by an explicit option),
// else the one Detect finds. A given engine that contradicts the engine
// Detect finds is an error; one given for a driver Detect cannot see
// through is trusted.
func Choose(db *sql.DB, given Kind) (Kind, error) {
	if given == "" {
		return Detect(db)
	}
	if db == nil {
		return "", fmt.Errorf("%w: the *sql.DB is nil", ErrUnsupportedDatabase)
	}
	if found, err := Detect(db); err == nil && found != given {
		return "", fmt.Errorf("%w: the engine %s was given, but the driver (%T) is %s's; give %s or none", ErrUnsupportedDatabase, given, db.Driver(), found, found)
	}
	return given, nil
}

// driverKind finds one of the three drivers in v: v itself, or a driver
// held (directly or through pointers and interfaces) in one of its fields,
// through depth wrappers at most. It reads types only.
func driverKind(v reflect.Value, depth int) (Kind, bool) {
	if !v.IsValid() || depth < 0 {
		return "", false
	}
	if k, ok := knownDrivers[v.Type()]; ok {
		return k, true
	}
	switch v.Kind() {
	case reflect.Interface, reflect.Pointer:
		if v.IsNil() {
			return "", false
		}
		return driverKind(v.Elem(), depth)
	case reflect.Struct:
		for i := range v.NumField() {
			if f := v.Field(i); holdsDriver(f) {
				if k, ok := driverKind(f, depth-1); ok {
					return k, true
				}
			}
		}
	}
	return "", false
}

// holdsDriver tells whether field f holds a driver (a wrapped one): its
// value, or the value its interface holds, is a driver.Driver.
func holdsDriver(f reflect.Value) bool {
	switch f.Kind() {
	case reflect.Interface, reflect.Pointer:
		if f.IsNil() {
			return false
		}
	}
	if f.Kind() == reflect.Interface {
		return f.Elem().Type().Implements(driverInterface)
	}
	return f.Type().Implements(driverInterface)
}

// PgxConn is pgx's connection under dc, a driver connection that
// database/sql's Conn.Raw hands out: dc itself, or the connection a wrapper
// returns from its Raw() or Unwrap() method (otelsql has Raw), through
// maxWrapDepth wrappers at most. ok is false when none is found: the
// caller then does without what only pgx can do (COPY, LISTEN).
func PgxConn(dc any) (c *stdlib.Conn, ok bool) {
	for range maxWrapDepth {
		switch w := dc.(type) {
		case *stdlib.Conn:
			return w, true
		case interface{ Raw() driver.Conn }:
			dc = w.Raw()
		case interface{ Unwrap() driver.Conn }:
			dc = w.Unwrap()
		default:
			return nil, false
		}
	}
	return nil, false
}
