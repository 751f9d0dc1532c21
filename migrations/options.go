package migrations

// The options of Install, Check, Migrate, Uninstall and GooseMigrations.

import (
	"database/sql"
	"fmt"

	"github.com/jobqueue/jobqueue/internal/engine"
)

// Option configures Install, Check, Migrate, Uninstall and GooseMigrations.
type Option func(*options) error

type options struct {
	// kind is the engine named with WithEngine; "" detects it.
	kind engine.Kind
	// report, set by WithReport, is filled by Uninstall and
	// UninstallEmpty with what they dropped.
	report *UninstallReport
}

// WithEngine names the engine db talks to: "postgres", "mysql" (also for
// MariaDB) or "sqlite". The engine is detected from db's driver, also
// through a wrapper that keeps the driver in a field
// (github.com/XSAM/otelsql, sqlhooks and the like); name it for a wrapper
// that detection cannot see through (its error says so). The driver under
// the wrapper must still be pgx's stdlib, go-sql-driver/mysql or
// modernc.org/sqlite.
func WithEngine(name string) Option {
	return func(o *options) error {
		k, err := engine.ParseKind(name)
		if err != nil {
			return fmt.Errorf("WithEngine: %w", err)
		}
		o.kind = k
		return nil
	}
}

// applyOptions reads opts.
func applyOptions(opts []Option) (options, error) {
	var o options
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return options{}, err
		}
	}
	return o, nil
}

// engineOf is the engine of db: the one opts name, else the one its driver
// shows (engine.Choose).
func engineOf(db *sql.DB, opts []Option) (engine.Kind, error) {
	o, err := applyOptions(opts)
	if err != nil {
		return "", err
	}
	return engine.Choose(db, o.kind)
}

// tableFor is the table named table on db's engine (engineOf), its name
// checked for that engine (engine.ParseTable) before any SQL runs.
func tableFor(db *sql.DB, table string, opts []Option) (engine.Table, error) {
	k, err := engineOf(db, opts)
	if err != nil {
		return engine.Table{}, err
	}
	return engine.ParseTable(k, table)
}
