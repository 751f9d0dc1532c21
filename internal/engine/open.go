package engine

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"
)

// ErrBadURL is returned by Open for a database URL it cannot use.
var ErrBadURL = errors.New("jobqueue: bad database URL")

// DriverDSN turns a database URL into the database/sql driver name and DSN
// that Open uses, with the options the queue needs:
//
//   - postgres://… and postgresql://… go to pgx as they are (connect_timeout=10
//     is added when missing);
//   - mysql://user:pass@host:port/db (or mariadb://) becomes a
//     go-sql-driver DSN with parseTime=true, loc=UTC and a 10 s dial timeout;
//   - sqlite:PATH or sqlite://PATH becomes a modernc.org/sqlite file DSN with
//     WAL, a 10 s busy timeout and BEGIN IMMEDIATE transactions; options
//     after a '?' (say _pragma=…) are passed on to the driver after these.
func DriverDSN(rawURL string) (driver, dsn string, k Kind, err error) {
	scheme, rest, ok := strings.Cut(rawURL, ":")
	if !ok || rest == "" {
		return "", "", "", fmt.Errorf("%w: %q; use postgres://…, mysql://user:pass@host:port/db or sqlite:PATH", ErrBadURL, rawURL)
	}
	switch strings.ToLower(scheme) {
	case "postgres", "postgresql":
		if !strings.HasPrefix(rest, "//") {
			return "", "", "", fmt.Errorf("%w: %q; use postgres://user@host:port/db", ErrBadURL, redact(rawURL))
		}
		if _, err := url.Parse(rawURL); err != nil {
			return "", "", "", fmt.Errorf("%w: %v", ErrBadURL, err)
		}
		// pgx knows the scheme in lower case only.
		rawURL = strings.ToLower(scheme) + ":" + rest
		// The URL goes to pgx as it is (pgx reads multi-host URLs, and
		// reads some others unlike net/url), with connect_timeout added
		// unless the URL or the environment sets one.
		dsn := rawURL
		_, query, _ := strings.Cut(rawURL, "?")
		given, _ := url.ParseQuery(query)
		cfg, cfgErr := pgconn.ParseConfig(rawURL)
		if (cfgErr != nil || cfg.ConnectTimeout == 0) && !given.Has("connect_timeout") {
			sep := "?"
			switch {
			case strings.HasSuffix(rawURL, "?"), strings.Contains(rawURL, "?") && strings.HasSuffix(rawURL, "&"):
				sep = ""
			case strings.Contains(rawURL, "?"):
				sep = "&"
			}
			dsn += sep + "connect_timeout=10"
			// pgx finds the user, host and database of some URLs by
			// other rules than net/url (an '@' after the '?' of
			// "postgres://?@" ends up in the host once an option
			// follows; in "postgres://?@," the '?' is the user's, so
			// the option lands in the host and is lost): refuse a URL
			// that the option would turn into another database or that
			// would not get it.
			if cfgErr == nil {
				if got, err := pgconn.ParseConfig(dsn); err != nil || !samePgTarget(cfg, got) || got.ConnectTimeout != 10*time.Second {
					return "", "", "", fmt.Errorf("%w: pgx reads %q otherwise than a URL once connect_timeout=10 is added (another database, or no timeout); percent-encode '@', '/' and '?' inside the user, password and options (%%40, %%2F, %%3F), or give connect_timeout yourself", ErrBadURL, redact(rawURL))
				}
			}
		}
		return "pgx", dsn, Postgres, nil
	case "mysql", "mariadb":
		u, err := url.Parse(rawURL)
		if err != nil {
			return "", "", "", fmt.Errorf("%w: %v", ErrBadURL, err)
		}
		if u.Host == "" {
			return "", "", "", fmt.Errorf("%w: %q names no host; use mysql://user:pass@host:port/db", ErrBadURL, rawURL)
		}
		dbName := strings.TrimPrefix(u.Path, "/")
		if dbName == "" || strings.Contains(dbName, "/") {
			return "", "", "", fmt.Errorf("%w: %q names no database; use mysql://user:pass@host:port/db", ErrBadURL, rawURL)
		}
		host := u.Host
		if u.Port() == "" {
			host += ":3306"
		}
		var creds string
		if u.User != nil {
			if strings.Contains(u.User.Username(), ":") {
				return "", "", "", fmt.Errorf("%w: the user name in %q contains ':', which go-sql-driver/mysql cannot take", ErrBadURL, redact(rawURL))
			}
			creds = u.User.Username()
			if p, ok := u.User.Password(); ok {
				creds += ":" + p
			}
			creds += "@"
		}
		q := u.Query()
		q.Set("parseTime", "true")
		q.Set("loc", "UTC")
		if q.Get("timeout") == "" {
			q.Set("timeout", "10s")
		}
		if q.Get("charset") == "" {
			q.Set("charset", "utf8mb4")
		}
		// The driver unescapes the name: a '?' in it would start the options.
		return "mysql", fmt.Sprintf("%stcp(%s)/%s?%s", creds, host, url.PathEscape(dbName), q.Encode()), MySQL, nil
	case "sqlite", "sqlite3", "file":
		path, query, _ := strings.Cut(strings.TrimPrefix(rest, "//"), "?")
		if path == "" {
			return "", "", "", fmt.Errorf("%w: %q names no file; use sqlite:PATH", ErrBadURL, rawURL)
		}
		dsn := SQLiteDSN(path)
		if query != "" {
			// The URL's own options (say _pragma=…) come after ours, so
			// that where both set a pragma, the URL's wins.
			dsn += "&" + query
		}
		return "sqlite", dsn, SQLite, nil
	default:
		return "", "", "", fmt.Errorf("%w: unknown scheme %q in %q; use postgres://…, mysql://user:pass@host:port/db or sqlite:PATH", ErrBadURL, scheme, rawURL)
	}
}

// SQLiteDSN is the modernc.org/sqlite DSN for the database file at path, with
// the settings a queue wants: WAL, a busy timeout and BEGIN IMMEDIATE.
func SQLiteDSN(path string) string {
	return "file:" + path + "?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_txlock=immediate"
}

// Open opens the database at rawURL (see DriverDSN) and checks that it
// answers within 10 seconds.
func Open(ctx context.Context, rawURL string) (*sql.DB, Kind, error) {
	driver, dsn, k, err := DriverDSN(rawURL)
	if err != nil {
		return nil, "", err
	}
	var db *sql.DB
	if k == Postgres {
		db, err = openPostgres(dsn)
	} else {
		db, err = sql.Open(driver, dsn)
	}
	if err != nil {
		return nil, "", fmt.Errorf("open %s database: %w", k, err)
	}
	pingCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := db.PingContext(pingCtx); err != nil {
		db.Close()
		return nil, "", fmt.Errorf("cannot reach the %s database at %s: %w; check that the server runs and the URL is right", k, redact(rawURL), err)
	}
	return db, k, nil
}

// openPostgres opens a pgx pool on dsn. When the URL sets a
// default_query_exec_mode other than cache_statement (what pgx needs behind
// a transaction pooler such as PgBouncer), pgx sends no cancel requests
// (see NoCancelRequests): a query whose context ends is interrupted by
// closing its connection.
func openPostgres(dsn string) (*sql.DB, error) {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, err
	}
	if cfg.DefaultQueryExecMode != pgx.QueryExecModeCacheStatement {
		NoCancelRequests(&cfg.Config)
	}
	return stdlib.OpenDB(*cfg), nil
}

// redact hides the password of a URL for error messages.
func redact(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil || u.User == nil {
		return rawURL
	}
	return u.Redacted()
}

// ExplainPooler adds what to do to err when it is the mark of pgx's
// statement cache behind a transaction pooler (PgBouncer with
// pool_mode=transaction): a statement pgx prepared on one server session
// is missing on the next, or already there for another client. Other
// errors, and errors it explained already, are returned as they are.
func ExplainPooler(err error) error {
	var pe *pgconn.PgError
	var done *poolerError
	if errors.As(err, &done) || !errors.As(err, &pe) || (pe.Code != "42P05" && pe.Code != "26000") || !strings.Contains(pe.Message, "stmtcache_") {
		return err
	}
	return &poolerError{err}
}

// poolerError is an error explained by ExplainPooler.
type poolerError struct{ err error }

func (e *poolerError) Error() string {
	return e.err.Error() + "; the connections seem to go through a transaction pooler (PgBouncer with pool_mode=transaction), where pgx cannot keep prepared statements: add default_query_exec_mode=exec to the postgres URL"
}

func (e *poolerError) Unwrap() error { return e.err }

// samePgTarget reports whether two pgx configurations name the same
// database: host, port, database, user and password.
func samePgTarget(a, b *pgconn.Config) bool {
	return a.Host == b.Host && a.Port == b.Port && a.Database == b.Database && a.User == b.User && a.Password == b.Password
}
