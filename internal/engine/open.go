package engine

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
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
//     after a '?' (say _pragma=…) are passed on to the driver, each in place
//     of the default it sets (see sqliteDefaults), and an option neither the driver nor SQLite knows (a misspelling,
//     which both would ignore) is refused (see sqliteURLOptions), as is a value
//     an option does not take (see sqliteOptionValues), before any file is made.
func DriverDSN(rawURL string) (driver, dsn string, k Kind, err error) {
	scheme, rest, ok := strings.Cut(rawURL, ":")
	if !ok || rest == "" {
		return "", "", "", fmt.Errorf("%w: %q; use postgres://…, mysql://user:pass@host:port/db or sqlite:PATH", ErrBadURL, rawURL)
	}
	switch strings.ToLower(scheme) {
	case "postgres", "postgresql":
		if !strings.HasPrefix(rest, "//") {
			return "", "", "", fmt.Errorf("%w: %q; use postgres://user@host:port/db", ErrBadURL, SafeURL(rawURL))
		}
		u, err := parseURL(rawURL)
		if err != nil {
			return "", "", "", err
		}
		// pgx knows the scheme in lower case only.
		rawURL = strings.ToLower(scheme) + ":" + rest
		// An '@' left unescaped in the user info: net/url ends it at the
		// last '@', pgx at an earlier one, so pgx would log in with a
		// piece of the password and dial the rest of it as a host name,
		// which its errors then show. Refuse the URL, quoting none of it.
		// The options are left out of the comparison: a user or password
		// given there (?user=…&password=…) rightly overrides the user info.
		if u.User != nil {
			authority, _, _ := strings.Cut(rawURL, "?")
			if cfg, err := pgconn.ParseConfig(authority); err == nil {
				name := u.User.Username()
				pw, hasPw := u.User.Password()
				if (name != "" && cfg.User != name) || (hasPw && cfg.Password != pw) {
					return "", "", "", fmt.Errorf("%w: pgx would read the user name or password in the %s:// URL otherwise than a URL reads them (an '@' in them, perhaps); percent-encode the special characters of the user name and password (e.g. %%40 for '@', %%2F for '/', %%3F for '?')", ErrBadURL, strings.ToLower(scheme))
				}
			}
		}
		// The URL goes to pgx as it is (pgx reads multi-host URLs, and
		// reads some others unlike net/url), with connect_timeout added
		// unless the URL or the environment sets one.
		dsn := rawURL
		_, query, _ := strings.Cut(rawURL, "?")
		given, _ := url.ParseQuery(query)
		cfg, cfgErr := pgconn.ParseConfig(rawURL)
		if (cfgErr != nil || cfg.ConnectTimeout == 0) && !given.Has("connect_timeout") {
			dsn = addURLOption(rawURL, "connect_timeout=10")
			// pgx finds the user, host and database of some URLs by
			// other rules than net/url (an '@' after the '?' of
			// "postgres://?@" ends up in the host once an option
			// follows; in "postgres://?@," the '?' is the user's, so
			// the option lands in the host and is lost): refuse a URL
			// that the option would turn into another database or that
			// would not get it.
			if cfgErr == nil {
				if got, err := pgconn.ParseConfig(dsn); err != nil || !samePgTarget(cfg, got) || got.ConnectTimeout != 10*time.Second {
					return "", "", "", fmt.Errorf("%w: pgx reads %q otherwise than a URL once connect_timeout=10 is added (another database, or no timeout); percent-encode '@', '/' and '?' inside the user, password and options (%%40, %%2F, %%3F), or give connect_timeout yourself", ErrBadURL, SafeURL(rawURL))
				}
			}
		}
		return "pgx", dsn, Postgres, nil
	case "mysql", "mariadb":
		u, err := parseURL(rawURL)
		if err != nil {
			return "", "", "", err
		}
		if u.Host == "" {
			return "", "", "", fmt.Errorf("%w: %q names no host; use mysql://user:pass@host:port/db", ErrBadURL, SafeURL(rawURL))
		}
		dbName := strings.TrimPrefix(u.Path, "/")
		if dbName == "" || strings.Contains(dbName, "/") {
			return "", "", "", fmt.Errorf("%w: %q names no database; use mysql://user:pass@host:port/db", ErrBadURL, SafeURL(rawURL))
		}
		host := u.Host
		if u.Port() == "" {
			host += ":3306"
		} else if err := checkPort(u.Port()); err != nil {
			return "", "", "", err
		}
		var creds string
		if u.User != nil {
			if strings.Contains(u.User.Username(), ":") {
				return "", "", "", fmt.Errorf("%w: the user name in %q contains ':', which go-sql-driver/mysql cannot take", ErrBadURL, SafeURL(rawURL))
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
		given, err := checkSQLiteOptions(query)
		if err != nil {
			return "", "", "", err
		}
		// The URL's own options (say _pragma=…) come after the defaults
		// they do not replace.
		options := sqliteDefaults(given)
		if query != "" {
			options = append(options, query)
		}
		return "sqlite", "file:" + sqliteURIPath(path) + "?" + strings.Join(options, "&"), SQLite, nil
	default:
		return "", "", "", fmt.Errorf("%w: unknown scheme %q in %q; use postgres://…, mysql://user:pass@host:port/db or sqlite:PATH", ErrBadURL, scheme, SafeURL(rawURL))
	}
}

// sqliteURLOptions lists the options a sqlite: URL may carry after its '?':
// modernc.org/sqlite's own (the underscore keys and vfs, see its package
// documentation) and SQLite's URI parameters (https://www.sqlite.org/uri.html),
// which reach SQLite because the DSN is a file: URI. Both would ignore any
// other name without a word.
func sqliteURLOptions() []string {
	return []string{
		"_auto_vacuum", "_busy_timeout", "_defensive", "_dqs", "_error_rc", "_fk",
		"_foreign_keys", "_inttotime", "_journal", "_journal_mode", "_pragma",
		"_query_only", "_sync", "_synchronous", "_texttotime", "_time_format",
		"_time_integer_format", "_timeout", "_timezone", "_txlock", "_vacuum",
		"cache", "immutable", "mode", "modeof", "nolock", "psow", "vfs",
	}
}

// checkSQLiteOptions parses the options of a sqlite: URL (query, what
// follows its '?'), refusing options that do not parse or that neither
// modernc.org/sqlite nor SQLite knows, naming them and the accepted ones,
// and values an option does not take (checkSQLiteValues).
func checkSQLiteOptions(query string) (url.Values, error) {
	given, err := url.ParseQuery(query)
	if err != nil {
		return nil, fmt.Errorf("%w: the options after the '?' of the sqlite URL do not parse (%v); write them as name=value joined by '&', with '%%', '&', ';' and '+' in a value percent-encoded", ErrBadURL, err)
	}
	accepted := sqliteURLOptions()
	var unknown []string
	for name := range given {
		if !slices.Contains(accepted, name) {
			unknown = append(unknown, strconv.Quote(name))
		}
	}
	if len(unknown) > 0 {
		slices.Sort(unknown)
		return nil, fmt.Errorf("%w: unknown option %s in the sqlite URL, which would be ignored; correct its spelling or remove it (the accepted options are %s)", ErrBadURL, strings.Join(unknown, ", "), strings.Join(accepted, ", "))
	}
	if err := checkSQLiteValues(given); err != nil {
		return nil, err
	}
	return given, nil
}

// sqliteValues is what an option of a sqlite: URL takes: valid tells a
// value it takes, accepted lists them for an error.
type sqliteValues struct {
	keys     []string
	valid    func(string) bool
	accepted string
}

// sqliteOptionValues is the values of the options of a sqlite: URL that can
// be checked before connecting, as modernc.org/sqlite (v1.62) and SQLite
// check them: those would be refused only when the driver connects, after
// it has made the database file (or, for SQLite's cache and psow, ignored).
// _pragma, vfs and modeof are left to the driver and SQLite.
func sqliteOptionValues() []sqliteValues {
	mattnBool := oneOf(true, "0", "1", "false", "true", "no", "yes", "off", "on")
	goBool := oneOf(false, "1", "t", "T", "TRUE", "true", "True", "0", "f", "F", "FALSE", "false", "False")
	words := oneOf(true, "on", "off", "yes", "no", "true", "false")
	uriBool := sqliteValues{valid: func(v string) bool { // SQLite takes any integer too
		_, err := strconv.ParseInt(v, 10, 32)
		return err == nil || words.valid(v)
	}, accepted: words.accepted + " or an integer (0 is false)"}
	millis := sqliteValues{valid: func(v string) bool {
		_, err := strconv.ParseInt(v, 10, 64)
		return err == nil
	}, accepted: "a whole number of milliseconds"}
	zone := sqliteValues{valid: func(v string) bool {
		_, err := time.LoadLocation(v)
		return v != "" && err == nil
	}, accepted: "a time zone name such as UTC or Europe/Paris"}
	return []sqliteValues{
		oneOf(true, "deferred", "immediate", "exclusive").of("_txlock"),
		oneOf(true, "DELETE", "TRUNCATE", "PERSIST", "MEMORY", "WAL", "OFF").of("_journal_mode", "_journal"),
		oneOf(true, "0", "OFF", "1", "NORMAL", "2", "FULL", "3", "EXTRA").of("_synchronous", "_sync"),
		oneOf(true, "0", "NONE", "1", "FULL", "2", "INCREMENTAL").of("_auto_vacuum", "_vacuum"),
		mattnBool.of("_foreign_keys", "_fk", "_query_only"),
		goBool.of("_dqs", "_defensive", "_error_rc", "_inttotime", "_texttotime"),
		oneOf(false, "sqlite", "datetime", "string_no_monotonic").of("_time_format"),
		oneOf(false, "unix", "unix_milli", "unix_micro", "unix_nano").of("_time_integer_format"),
		millis.of("_busy_timeout", "_timeout"),
		zone.of("_timezone"),
		oneOf(false, "shared", "private").of("cache"),
		oneOf(false, "ro", "rw", "rwc", "memory").of("mode"),
		uriBool.of("immutable", "nolock", "psow"),
	}
}

// oneOf is the values listed, in any case when fold is true.
func oneOf(fold bool, values ...string) sqliteValues {
	accepted := "one of " + strings.Join(values, ", ")
	if fold {
		accepted += " (in any case)"
	}
	return sqliteValues{valid: func(v string) bool {
		return slices.ContainsFunc(values, func(a string) bool { return a == v || fold && strings.EqualFold(a, v) })
	}, accepted: accepted}
}

// of is v for the options keys.
func (v sqliteValues) of(keys ...string) sqliteValues {
	v.keys = keys
	return v
}

// checkSQLiteValues refuses a value of an option in given that the option
// does not take (sqliteOptionValues), an empty one included (the driver
// would take it as unset, and the default it replaces would be lost too),
// naming the option, the value and the values it takes.
func checkSQLiteValues(given url.Values) error {
	for _, o := range sqliteOptionValues() {
		for _, key := range o.keys {
			for _, v := range given[key] {
				if !o.valid(v) {
					return fmt.Errorf("%w: option %s=%q in the sqlite URL is not a value it takes; give %s (nothing was opened or created)", ErrBadURL, key, v, o.accepted)
				}
			}
		}
	}
	return nil
}

// SQLiteDSN is the modernc.org/sqlite DSN for the database file at path, with
// the settings a queue wants: WAL, a busy timeout and BEGIN IMMEDIATE. The
// DSN is a SQLite file: URI, so the path is escaped (see sqliteURIPath).
func SQLiteDSN(path string) string {
	return "file:" + sqliteURIPath(path) + "?" + strings.Join(sqliteDefaults(nil), "&")
}

// sqliteDefaults is the DSN options of SQLiteDSN's settings that the URL
// options given do not set themselves. They are left out rather than put
// before the URL's: the driver runs its _pragma values sorted by name, not
// in the URL's order (so of two busy_timeout, journal_mode or synchronous
// pragmas either may run last), runs _busy_timeout before every _pragma,
// and reads the first _txlock; a URL's setting given after a default of the
// same thing was not always the one that took.
func sqliteDefaults(given url.Values) []string {
	defaults := []struct {
		option string
		keys   []string // the driver's options that set it too
		pragma string   // the pragma it sets
	}{
		{"_pragma=busy_timeout(10000)", []string{"_busy_timeout", "_timeout"}, "busy_timeout"},
		{"_pragma=journal_mode(WAL)", []string{"_journal_mode", "_journal"}, "journal_mode"},
		{"_pragma=synchronous(NORMAL)", []string{"_synchronous", "_sync"}, "synchronous"},
		{"_txlock=immediate", []string{"_txlock"}, ""},
	}
	var kept []string
	for _, d := range defaults {
		set := slices.ContainsFunc(d.keys, given.Has)
		for _, p := range given["_pragma"] {
			set = set || d.pragma != "" && pragmaName(p) == d.pragma
		}
		if !set {
			kept = append(kept, d.option)
		}
	}
	return kept
}

// pragmaName is the name of the pragma a _pragma option's value runs
// ("busy_timeout" for " Main.BUSY_TIMEOUT = 5000"), in lower case without
// its schema.
func pragmaName(value string) string {
	name, _, _ := strings.Cut(value, "(")
	name, _, _ = strings.Cut(name, "=")
	name = strings.ToLower(strings.TrimSpace(name))
	if _, after, ok := strings.Cut(name, "."); ok {
		name = strings.TrimSpace(after)
	}
	return name
}

// sqliteURIPath escapes the file name path for the path of a SQLite file:
// URI (https://www.sqlite.org/uri.html), where "%HH" is decoded, '?'
// starts the options, '#' ends the path, and a leading "//" starts an
// authority: those characters are percent-encoded, everything else (spaces
// included) is taken as it is.
func sqliteURIPath(path string) string {
	var b strings.Builder
	for i := 0; i < len(path); i++ {
		switch c := path[i]; {
		case c == '%' || c == '?' || c == '#' || c == '/' && i == 1 && path[0] == '/':
			fmt.Fprintf(&b, "%%%02X", c)
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
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
		if errors.Is(err, pgconn.ErrReadOnlyConnection) {
			return nil, "", fmt.Errorf("cannot reach a primary of the %s database at %s: %w; no host of the URL accepts writes (target_session_attrs=read-write): the primary is down or unreachable and no standby has been promoted yet, as during a failover; commands and workers connect to the new primary once one is", k, SafeURL(rawURL), err)
		}
		return nil, "", fmt.Errorf("cannot reach the %s database at %s: %w; check that the server runs and the URL is right", k, SafeURL(rawURL), err)
	}
	return db, k, nil
}

// openPostgres opens a pgx pool on dsn. When the URL sets a
// default_query_exec_mode other than cache_statement (what pgx needs behind
// a transaction pooler such as PgBouncer), pgx sends no cancel requests
// (see NoCancelRequests): a query whose context ends is interrupted by
// closing its connection. A connection whose server refuses writes as
// read-only is closed (closeOnReadOnly).
func openPostgres(dsn string) (*sql.DB, error) {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, err
	}
	closeOnReadOnly(&cfg.Config)
	if cfg.DefaultQueryExecMode != pgx.QueryExecModeCacheStatement {
		NoCancelRequests(&cfg.Config)
	}
	return stdlib.OpenDB(*cfg), nil
}

// addURLOption appends option (key=value) to the query of rawURL.
func addURLOption(rawURL, option string) string {
	sep := "?"
	switch {
	case strings.HasSuffix(rawURL, "?"), strings.Contains(rawURL, "?") && strings.HasSuffix(rawURL, "&"):
		sep = ""
	case strings.Contains(rawURL, "?"):
		sep = "&"
	}
	return rawURL + sep + option
}

// PooledURL is rawURL for connections that go through a transaction
// pooler (PgBouncer in transaction pooling mode): a postgres:// or
// postgresql:// URL that sets no default_query_exec_mode gets
// default_query_exec_mode=exec, so that pgx keeps no prepared statement
// in a server session (another client's transaction may run there next:
// "prepared statement stmtcache_… already exists"). Any other URL, and one
// that sets the mode itself, is returned as it is.
func PooledURL(rawURL string) string {
	scheme, rest, ok := strings.Cut(rawURL, ":")
	if !ok || !strings.HasPrefix(rest, "//") {
		return rawURL
	}
	if s := strings.ToLower(scheme); s != "postgres" && s != "postgresql" {
		return rawURL
	}
	_, query, _ := strings.Cut(rawURL, "?")
	if given, _ := url.ParseQuery(query); given.Has("default_query_exec_mode") {
		return rawURL
	}
	return addURLOption(rawURL, "default_query_exec_mode=exec")
}

// parseURL is url.Parse for a database URL, with an error that wraps
// ErrBadURL and says what is wrong without quoting the URL: what net/url
// refused may be the password, and its error quotes the URL with %q, whose
// escapes ('"' as \", '\' as \\) keep a caller from finding the password
// to hide it.
func parseURL(rawURL string) (*url.URL, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("%w: %s; percent-encode the special characters of the user name and password (e.g. %%40 for '@', %%2F for '/', %%23 for '#', %%25 for '%%', %%22 for '\"', %%5C for '\\')", ErrBadURL, describeURLError(err))
	}
	return u, nil
}

// describeURLError says what url.Parse found wrong, without the parts of
// the URL that its errors quote (a bad escape, a bad port: perhaps a piece
// of a password).
func describeURLError(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	var esc url.EscapeError
	var host url.InvalidHostError
	msg := strings.TrimPrefix(err.Error(), "net/url: ")
	switch {
	case errors.As(err, &esc):
		return "it has a '%' that is not followed by two hexadecimal digits"
	case errors.As(err, &host):
		return "its host name holds a character that is not allowed there"
	case strings.HasPrefix(msg, "invalid port"):
		return "what follows the last ':' of its host is not a port number (a '/', '?' or '#' in the password ends the host early)"
	case msg == "invalid userinfo":
		return "its user name or password holds a character that is not allowed there"
	}
	return "net/url cannot parse it: " + msg
}

// checkPort refuses a port (digits, as net/url leaves it) outside 1-65535.
func checkPort(port string) error {
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return fmt.Errorf("%w: port %s is out of range; use 1 to 65535", ErrBadURL, port)
	}
	return nil
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

// ExplainReadOnly adds what to do to err when it is PostgreSQL's refusal of
// a write in a read-only transaction (SQLSTATE 25006): the connection
// reached a standby (a URL of several hosts without
// target_session_attrs=read-write reaches whichever answers first, and after
// a failover the old primary may come back as one), or the session has
// default_transaction_read_only on. Other errors, and errors it explained
// already, are returned as they are.
func ExplainReadOnly(err error) error {
	var pe *pgconn.PgError
	var done *readOnlyError
	if errors.As(err, &done) || !errors.As(err, &pe) || pe.Code != "25006" {
		return err
	}
	return &readOnlyError{err}
}

// readOnlyError is an error explained by ExplainReadOnly.
type readOnlyError struct{ err error }

func (e *readOnlyError) Error() string {
	return e.err.Error() + "; the server accepts no writes on this connection (a standby, or default_transaction_read_only is on): connect to the primary, and with several hosts in the postgres URL add target_session_attrs=read-write"
}

func (e *readOnlyError) Unwrap() error { return e.err }

// samePgTarget reports whether two pgx configurations name the same
// database: host, port, database, user and password.
func samePgTarget(a, b *pgconn.Config) bool {
	return a.Host == b.Host && a.Port == b.Port && a.Database == b.Database && a.User == b.User && a.Password == b.Password
}
