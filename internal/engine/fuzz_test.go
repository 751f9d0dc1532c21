package engine

import (
	"errors"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgconn"
)

var fuzzTableRE = regexp.MustCompile(`^[a-z_A-Z][a-zA-Z0-9_]*$`)

// FuzzParseTable: whatever the name, ParseTable either refuses it with
// ErrInvalidTableName or returns a name that is safe to splice into SQL
// (letters, digits, underscores; lower case and at most 50 characters on
// PostgreSQL, at most 64 elsewhere), stable when parsed again, whose
// index names fit PostgreSQL's 63 bytes and stay distinct.
func FuzzParseTable(f *testing.F) {
	for _, s := range []string{"jobs", "Jobs", "_x9", "9x", "a-b", "a b", `a"b`, "a`b", "jöbs", "", strings.Repeat("a", 50), strings.Repeat("a", 51), strings.Repeat("b", 64), strings.Repeat("b", 65), "jobs\x00", "jobs\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		for _, k := range []Kind{Postgres, MySQL, SQLite} {
			tbl, err := ParseTable(k, name)
			if err != nil {
				if !errors.Is(err, ErrInvalidTableName) {
					t.Fatalf("%s %q: error %v is not ErrInvalidTableName", k, name, err)
				}
				continue
			}
			max := maxTableName
			if k == Postgres {
				max = maxPostgresTableName
				if tbl.Name != strings.ToLower(name) {
					t.Fatalf("%s %q: name %q is not folded to lower case", k, name, tbl.Name)
				}
			} else if tbl.Name != name {
				t.Fatalf("%s %q: name changed to %q", k, name, tbl.Name)
			}
			if !fuzzTableRE.MatchString(tbl.Name) || len(tbl.Name) > max {
				t.Fatalf("%s accepted %q as %q", k, name, tbl.Name)
			}
			again, err := ParseTable(k, tbl.Name)
			if err != nil || again != tbl {
				t.Fatalf("%s %q: parsing the stored name %q again gives %v, %v", k, name, tbl.Name, again, err)
			}
			q := tbl.Quoted()
			if q[1:len(q)-1] != tbl.Name || strings.ContainsAny(tbl.Name, "\"`'") {
				t.Fatalf("%s %q: quoted as %s", k, name, q)
			}
			a, b := tbl.IndexName("type_status_scheduled"), tbl.IndexName("status_scheduled")
			if a == b || k == Postgres && (len(a) > 63 || len(b) > 63) {
				t.Fatalf("%s %q: index names %q and %q", k, name, a, b)
			}
		}
	})
}

// FuzzDriverDSN: whatever the --db URL, DriverDSN either refuses it with
// ErrBadURL or returns the driver of its scheme and a DSN that the driver
// reads as the same database, with the options the queue needs
// (parseTime and UTC on MySQL, a connect timeout on PostgreSQL, WAL and a
// busy timeout on SQLite).
func FuzzDriverDSN(f *testing.F) {
	for _, s := range []string{
		"postgres://postgres@127.0.0.1:5432/test?sslmode=disable",
		"postgresql://u:p@h1,h2:5433/db?target_session_attrs=read-write&connect_timeout=3",
		"postgres://h/db?default_query_exec_mode=exec",
		"mysql://root@127.0.0.1:3306/test",
		"mariadb://u:p%40ss@h/db?timeout=1s&charset=latin1",
		"mysql://u:p/w@h/db",
		"mysql://h/db%3Fx",
		"mysql:///db", "mysql://h/", "mysql://h/a/b",
		"sqlite:jobs.db", "sqlite:///tmp/x.db?_pragma=foreign_keys(1)", "sqlite:x.db?_pragma=journal_mode(DELETE)&_timeout=5",
		"sqlite:x.db?_txlock=deferred&_sync=0&_busy_timout=1", "sqlite:", "file:x.db",
		"", ":", "x", "http://h/db", "postgres://%zz",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		driver, dsn, k, err := DriverDSN(raw)
		if err != nil {
			if !errors.Is(err, ErrBadURL) {
				t.Fatalf("%q: error %v is not ErrBadURL", raw, err)
			}
			return
		}
		scheme, _, _ := strings.Cut(raw, ":")
		switch strings.ToLower(scheme) {
		case "postgres", "postgresql":
			if driver != "pgx" || k != Postgres {
				t.Fatalf("%q: driver %s, kind %s", raw, driver, k)
			}
			want, err := pgconn.ParseConfig(strings.ToLower(scheme) + raw[len(scheme):])
			if err != nil {
				return // pgx refuses the URL itself; so it will the DSN
			}
			got, err := pgconn.ParseConfig(dsn)
			if err != nil {
				t.Fatalf("%q: pgx reads the URL but not the DSN %q: %v", raw, dsn, err)
			}
			if got.Host != want.Host || got.Port != want.Port || got.Database != want.Database || got.User != want.User || got.Password != want.Password {
				t.Fatalf("%q: the DSN %q names another database: %s@%s:%d/%s", raw, dsn, got.User, got.Host, got.Port, got.Database)
			}
			_, query, _ := strings.Cut(raw, "?")
			given, _ := url.ParseQuery(query)
			if want.ConnectTimeout == 0 && !given.Has("connect_timeout") && got.ConnectTimeout != 10*time.Second {
				t.Fatalf("%q: connect timeout %v, want 10s", raw, got.ConnectTimeout)
			}
		case "mysql", "mariadb":
			if driver != "mysql" || k != MySQL {
				t.Fatalf("%q: driver %s, kind %s", raw, driver, k)
			}
			u, err := url.Parse(raw)
			if err != nil {
				t.Fatalf("%q: accepted, but it is no URL: %v", raw, err)
			}
			cfg, err := mysql.ParseDSN(dsn)
			if err != nil {
				return // a bad option: the CLI's checkDSN reports it
			}
			if cfg.DBName != strings.TrimPrefix(u.Path, "/") || !cfg.ParseTime || cfg.Loc != time.UTC {
				t.Fatalf("%q: the DSN %q reads as database %q, parseTime %v, loc %v", raw, dsn, cfg.DBName, cfg.ParseTime, cfg.Loc)
			}
			if cfg.User != u.User.Username() {
				t.Fatalf("%q: the DSN %q reads as user %q", raw, dsn, cfg.User)
			}
			if p, _ := u.User.Password(); cfg.Passwd != p {
				t.Fatalf("%q: the DSN %q reads as another password", raw, dsn)
			}
		default:
			if driver != "sqlite" || k != SQLite {
				t.Fatalf("%q: driver %s, kind %s", raw, driver, k)
			}
			// Each setting is the queue's default or the URL's own.
			_, query, _ := strings.Cut(dsn, "?")
			opts, err := url.ParseQuery(query)
			if !strings.HasPrefix(dsn, "file:") || err != nil {
				t.Fatalf("%q: DSN %q is no file: URI with options: %v", raw, dsn, err)
			}
			for _, setting := range []struct {
				pragma string
				keys   []string
			}{
				{"busy_timeout", []string{"_busy_timeout", "_timeout"}},
				{"journal_mode", []string{"_journal_mode", "_journal"}},
				{"synchronous", []string{"_synchronous", "_sync"}},
			} {
				n := 0
				for _, p := range opts["_pragma"] {
					if pragmaName(p) == setting.pragma {
						n++
					}
				}
				for _, key := range setting.keys {
					n += len(opts[key])
				}
				if n == 0 {
					t.Fatalf("%q: DSN %q lacks the queue's %s", raw, dsn, setting.pragma)
				}
			}
			if len(opts["_txlock"]) != 1 {
				t.Fatalf("%q: DSN %q has %d _txlock options, want 1", raw, dsn, len(opts["_txlock"]))
			}
		}
	})
}
