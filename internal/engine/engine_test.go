package engine

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestParseTable(t *testing.T) {
	cases := []struct {
		kind    Kind
		name    string
		want    string
		wantErr error
	}{
		{Postgres, "jobs", "jobs", nil},
		{Postgres, "Jobs", "jobs", nil},
		{Postgres, "_x9", "_x9", nil},
		{Postgres, strings.Repeat("a", 50), strings.Repeat("a", 50), nil},
		{Postgres, strings.Repeat("a", 51), "", ErrInvalidTableName},
		{MySQL, "Jobs", "Jobs", nil},
		{MySQL, strings.Repeat("a", 56), strings.Repeat("a", 56), nil},
		{MySQL, strings.Repeat("a", 57), "", ErrInvalidTableName},
		{SQLite, strings.Repeat("a", 56), strings.Repeat("a", 56), nil},
		{SQLite, strings.Repeat("a", 57), "", ErrInvalidTableName},
		{SQLite, "Jobs", "Jobs", nil},
		{SQLite, "", "", ErrInvalidTableName},
		{SQLite, "1abc", "", ErrInvalidTableName},
		{SQLite, "a-b", "", ErrInvalidTableName},
		{SQLite, "x;drop", "", ErrInvalidTableName},
		{SQLite, `x"y`, "", ErrInvalidTableName},
		{MySQL, "x`y", "", ErrInvalidTableName},
		{SQLite, "jöbs", "", ErrInvalidTableName},
		// SQLite reserves sqlite_*; "sqlite" would have side tables sqlite_<suffix>.
		{SQLite, "sqlite_jobs", "", ErrInvalidTableName},
		{SQLite, "SQLITE_jobs", "", ErrInvalidTableName},
		{SQLite, "Sqlite", "", ErrInvalidTableName},
		{SQLite, "sqlitejobs", "sqlitejobs", nil},
		{SQLite, "my_sqlite_jobs", "my_sqlite_jobs", nil},
		{Postgres, "sqlite_jobs", "sqlite_jobs", nil},
		{MySQL, "sqlite", "sqlite", nil},
		{Kind("oracle"), "jobs", "", ErrUnsupportedDatabase},
	}
	for _, c := range cases {
		got, err := ParseTable(c.kind, c.name)
		if c.wantErr != nil {
			if !errors.Is(err, c.wantErr) {
				t.Errorf("ParseTable(%s, %q) error = %v, want %v", c.kind, c.name, err, c.wantErr)
			}
			continue
		}
		if err != nil || got.Name != c.want || got.Kind != c.kind {
			t.Errorf("ParseTable(%s, %q) = %+v, %v; want name %q", c.kind, c.name, got, err, c.want)
		}
	}
}

func TestQuotedAndIndexName(t *testing.T) {
	long := strings.Repeat("t", 50)
	cases := []struct {
		table  Table
		quoted string
		index  string
	}{
		{Table{Postgres, "jobs"}, `"jobs"`, "idx_jobs_type_status_scheduled"},
		{Table{SQLite, "Jobs"}, `"Jobs"`, "idx_Jobs_type_status_scheduled"},
		{Table{MySQL, "jobs"}, "`jobs`", "idx_type_status_scheduled"},
		{Table{Postgres, long}, `"` + long + `"`, ("idx_" + long + "_type_status_scheduled")[:63]},
	}
	for _, c := range cases {
		if got := c.table.Quoted(); got != c.quoted {
			t.Errorf("%+v.Quoted() = %s, want %s", c.table, got, c.quoted)
		}
		if got := c.table.IndexName("type_status_scheduled"); got != c.index {
			t.Errorf("%+v.IndexName() = %s, want %s", c.table, got, c.index)
		}
	}
	// The longest PostgreSQL name still gives four distinct index names.
	seen := map[string]bool{}
	for _, s := range []string{"status_scheduled", "type_status_scheduled", "status_expires", "lease_until"} {
		n := Table{Postgres, long}.IndexName(s)
		if len(n) > 63 || seen[n] {
			t.Errorf("index name %q is too long or repeated", n)
		}
		seen[n] = true
	}
}

func TestTimeArg(t *testing.T) {
	tokyo := time.FixedZone("JST", 9*3600)
	at := time.Date(2026, 1, 2, 12, 30, 45, 678901234, tokyo) // 03:30:45.678901234 UTC
	if got := MySQL.TimeArg(at); got != "2026-01-02 03:30:45" {
		t.Errorf("MySQL.TimeArg = %v", got)
	}
	if got := SQLite.TimeArg(at); got != "2026-01-02 03:30:45.678901" {
		t.Errorf("SQLite.TimeArg = %v", got)
	}
	got, ok := Postgres.TimeArg(at).(time.Time)
	if !ok || got.Location() != time.UTC || !got.Equal(at) {
		t.Errorf("Postgres.TimeArg = %v", Postgres.TimeArg(at))
	}
	if u := AsUTC(time.Date(2026, 1, 2, 3, 4, 5, 6, tokyo)); u != time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC) {
		t.Errorf("AsUTC kept the zone offset: %v", u)
	}
}

func TestDriverDSN(t *testing.T) {
	cases := []struct {
		url    string
		driver string
		kind   Kind
		dsn    []string // substrings the DSN must hold
	}{
		{"postgres://u:p@h:5432/db?sslmode=disable", "pgx", Postgres, []string{"postgres://u:p@h:5432/db?", "sslmode=disable", "connect_timeout=10"}},
		{"postgresql://h/db?connect_timeout=3", "pgx", Postgres, []string{"connect_timeout=3"}},
		{"mysql://root@127.0.0.1:3306/test", "mysql", MySQL, []string{"root@tcp(127.0.0.1:3306)/test?", "parseTime=true", "loc=UTC", "timeout=10s", "charset=utf8mb4"}},
		{"mariadb://u:p%40ss@db/app", "mysql", MySQL, []string{"u:p@ss@tcp(db:3306)/app?"}},
		{"sqlite:jobqueue.db", "sqlite", SQLite, []string{"file:jobqueue.db?", "busy_timeout", "journal_mode(WAL)", "_txlock=immediate"}},
		{"sqlite:///tmp/x.db", "sqlite", SQLite, []string{"file:/tmp/x.db?"}},
		{"sqlite://rel.db", "sqlite", SQLite, []string{"file:rel.db?"}},
		{"sqlite:/tmp/x.db?_pragma=foreign_keys(1)", "sqlite", SQLite, []string{"file:/tmp/x.db?_pragma=busy_timeout", "&_pragma=foreign_keys(1)"}},
		// The DSN is a SQLite URI: '#' and '%' in the path are escaped, a
		// leading "//" is not read as an authority, spaces stay.
		{"sqlite:/tmp/we#ird.db", "sqlite", SQLite, []string{"file:/tmp/we%23ird.db?"}},
		{"sqlite:/tmp/a%20b.db", "sqlite", SQLite, []string{"file:/tmp/a%2520b.db?"}},
		{"sqlite:/tmp/a b.db", "sqlite", SQLite, []string{"file:/tmp/a b.db?"}},
		{"sqlite:////tmp/x.db", "sqlite", SQLite, []string{"file:/%2Ftmp/x.db?"}},
		{"mysql://root@127.0.0.1:65535/test", "mysql", MySQL, []string{"tcp(127.0.0.1:65535)"}},
		// User info that pgx reads as net/url does, or that the options
		// override, is taken as it is.
		{"postgres://u:p%40ss@h/db", "pgx", Postgres, []string{"postgres://u:p%40ss@h/db?"}},
		{"postgres://u:a@h/db?password=b", "pgx", Postgres, []string{"password=b"}},
		{"postgres://u@h/db?user=v", "pgx", Postgres, []string{"user=v"}},
		{"postgres://:pw@h/db", "pgx", Postgres, []string{"postgres://:pw@h/db?"}},
		{"postgres://u:@h/db", "pgx", Postgres, []string{"postgres://u:@h/db?"}},
		{"postgres://u:p:q@h/db", "pgx", Postgres, []string{"postgres://u:p:q@h/db?"}},
		{"postgres://u:p@h1:5432,h2:5433/db?target_session_attrs=read-write", "pgx", Postgres, []string{"h1:5432,h2:5433"}},
		{"postgres://u:p@/db?host=/var/run/postgresql", "pgx", Postgres, []string{"host=/var/run/postgresql"}},
	}
	for _, c := range cases {
		driver, dsn, k, err := DriverDSN(c.url)
		if err != nil || driver != c.driver || k != c.kind {
			t.Errorf("DriverDSN(%q) = %q, %q, %q, %v", c.url, driver, dsn, k, err)
			continue
		}
		for _, s := range c.dsn {
			if !strings.Contains(dsn, s) {
				t.Errorf("DriverDSN(%q) dsn %q lacks %q", c.url, dsn, s)
			}
		}
	}
	for _, bad := range []string{"", "jobs.db", "redis://h", "mysql://h", "mysql:///db", "mysql://h/a/b", "sqlite:", "sqlite://", "sqlite:?_pragma=x", "postgres://?@", "postgres://?@,",
		"mysql://h:0/db", "mysql://h:65536/db", "mysql://h:99999/db", "mysql://h:000000000000000099999/db"} {
		if _, _, _, err := DriverDSN(bad); !errors.Is(err, ErrBadURL) {
			t.Errorf("DriverDSN(%q) error = %v, want ErrBadURL", bad, err)
		}
	}
}

// TestKinds: Kinds lists each engine once, each one ParseKind reads back
// from its name, and each call returns a new slice.
func TestKinds(t *testing.T) {
	got := Kinds()
	want := map[Kind]bool{Postgres: true, MySQL: true, SQLite: true}
	if len(got) != len(want) {
		t.Fatalf("Kinds() = %v, want each of postgres, mysql, sqlite once", got)
	}
	for _, k := range got {
		if !want[k] {
			t.Errorf("Kinds() = %v: %q is not an engine or is there twice", got, k)
		}
		delete(want, k)
		if p, err := ParseKind(string(k)); err != nil || p != k {
			t.Errorf("ParseKind(%q) = %q, %v; want %q", k, p, err, k)
		}
	}
	got[0] = "changed"
	if again := Kinds(); again[0] == "changed" {
		t.Errorf("Kinds() shares its slice between calls: %v after the first was changed", again)
	}
}

func TestParseKind(t *testing.T) {
	cases := []struct {
		name string
		want Kind
	}{
		{"postgres", Postgres}, {"PostgreSQL", Postgres}, {"mysql", MySQL}, {"mariadb", MySQL},
		{"sqlite", SQLite}, {"sqlite3", SQLite}, {"", ""}, {"oracle", ""}, {"pg", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := ParseKind(c.name)
			if c.want == "" {
				if !errors.Is(err, ErrUnsupportedDatabase) || !strings.Contains(err.Error(), "use postgres, mysql") {
					t.Errorf("ParseKind(%q) = %q, %v; want ErrUnsupportedDatabase naming the three", c.name, got, err)
				}
				return
			}
			if err != nil || got != c.want {
				t.Errorf("ParseKind(%q) = %q, %v; want %q", c.name, got, err, c.want)
			}
		})
	}
}

// TestDriverDSNBadURLHidesPassword: a URL that net/url refuses is refused
// with ErrBadURL and an error that says what is wrong and to percent-encode,
// but shows no part of the URL's password, in any quoting (net/url's own
// error quotes the URL with %q, which escapes '"' and '\').
func TestDriverDSNBadURLHidesPassword(t *testing.T) {
	cases := []struct {
		url  string
		want string // in the error
	}{
		{`mysql://root:kiwi"mango@127.0.0.1:3306/test`, "user name or password"},
		{`postgres://root:kiwi"mango@127.0.0.1:5432/test`, "user name or password"},
		{`mysql://root:kiwi\mango@127.0.0.1:3306/test`, "user name or password"},
		{`postgresql://root:kiwi mango@127.0.0.1/test`, "user name or password"},
		{`mysql://root:kiwi%zzmango@127.0.0.1:3306/test`, "two hexadecimal digits"},
		{`postgres://root:kiwi%zzmango@127.0.0.1:5432/test`, "two hexadecimal digits"},
		{`mysql://root:kiwi#mango@127.0.0.1:3306/test`, "port number"},
		{`postgres://root:kiwi#mango@127.0.0.1:5432/test`, "port number"},
		{"mysql://root:kiwi\x01mango@127.0.0.1:3306/test", "control character"},
		// An '@' left in a password: net/url takes the last '@' as the
		// end of the user info, pgx an earlier one, so pgx would dial
		// "mango@127.0.0.1" and its error would show that piece.
		{"postgres://root:kiwi@mango@127.0.0.1:5432/test", "user name or password"},
		{"postgresql://root:kiwi@mango@127.0.0.1/test?sslmode=disable", "user name or password"},
		{"postgres://root:kiwi@mango@127.0.0.1:5432/test?connect_timeout=3", "user name or password"},
		{"postgres://root@kiwi@mango@127.0.0.1:5432/test", "user name or password"},
	}
	for _, c := range cases {
		_, _, _, err := DriverDSN(c.url)
		if !errors.Is(err, ErrBadURL) {
			t.Errorf("DriverDSN(%q) error = %v, want ErrBadURL", c.url, err)
			continue
		}
		msg := err.Error()
		for _, leak := range []string{"kiwi", "mango"} {
			if strings.Contains(msg, leak) {
				t.Errorf("DriverDSN(%q) error shows the password (%q): %s", c.url, leak, msg)
			}
		}
		for _, w := range []string{c.want, "percent-encode"} {
			if !strings.Contains(msg, w) {
				t.Errorf("DriverDSN(%q) error lacks %q: %s", c.url, w, msg)
			}
		}
	}
}

// TestDriverDSNBadPort: a MySQL URL's port outside 1-65535 is a bad URL
// that names the port and the range, found before any dial.
func TestDriverDSNBadPort(t *testing.T) {
	for _, port := range []string{"0", "65536", "99999"} {
		_, _, _, err := DriverDSN("mysql://root:secret@127.0.0.1:" + port + "/test")
		if !errors.Is(err, ErrBadURL) || !strings.Contains(err.Error(), "port "+port) || !strings.Contains(err.Error(), "1 to 65535") {
			t.Errorf("port %s: error = %v, want ErrBadURL naming the port and 1 to 65535", port, err)
		}
	}
}

// TestOpenSQLitePath: sqlite:PATH opens the file named PATH exactly,
// whatever characters it holds: a '#' does not cut it short, a "%20" is
// not decoded, spaces and other characters are kept.
func TestOpenSQLitePath(t *testing.T) {
	// Each file goes in a directory of its own under one temp dir: t.Run's
	// temp dirs are named after the subtest, so a name with a '#' would
	// put a wrongly opened file outside them.
	root := t.TempDir()
	for i, name := range []string{
		"we#ird.db", "a%20b.db", "100%.db", "with space.db", "semi;colon&and=eq.db",
		"quote'\"s.db", "plus+tilde~.db", "ünïcode.db", "#.db", "%.db",
	} {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join(root, strconv.Itoa(i))
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(dir, name)
			db, k, err := Open(context.Background(), "sqlite:"+path)
			if err != nil {
				t.Fatal(err)
			}
			_, err = db.Exec("CREATE TABLE t (x INTEGER)")
			db.Close()
			if err != nil || k != SQLite {
				t.Fatalf("kind %s, create a table: %v", k, err)
			}
			entries, err := os.ReadDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, e := range entries {
				if n := e.Name(); n != name+"-wal" && n != name+"-shm" {
					names = append(names, n)
				}
			}
			if len(names) != 1 || names[0] != name {
				t.Errorf("sqlite:%s made the files %q, want %q", path, names, name)
			}
		})
	}
}

// TestOpenSQLiteOptions: a sqlite: URL's options that the driver or SQLite
// knows take effect, in place of the defaults they set (which the driver
// ran after them, or first in its sorted order); the defaults they do not
// set stay; a misspelled or unknown one, which both would ignore,
// is refused with ErrBadURL naming it and listing the accepted ones, before
// any file is made.
func TestOpenSQLiteOptions(t *testing.T) {
	good := []struct {
		query  string
		pragma string // a PRAGMA whose answer shows that the option took
		want   string
	}{
		{"_busy_timeout=5000", "busy_timeout", "5000"},
		{"_timeout=4000", "busy_timeout", "4000"},
		{"_pragma=busy_timeout(3000)", "busy_timeout", "3000"},
		{"_pragma=foreign_keys(1)", "foreign_keys", "1"},
		{"_fk=1&_pragma=cache_size(-4000)", "cache_size", "-4000"},
		{"_foreign_keys=on", "foreign_keys", "1"},
		{"_synchronous=FULL", "synchronous", "2"},
		{"_pragma=synchronous(FULL)", "synchronous", "2"},
		{"_pragma=SYNCHRONOUS = 3", "synchronous", "3"},
		{"_pragma=journal_mode(DELETE)", "journal_mode", "delete"},
		{"_pragma=main.journal_mode(TRUNCATE)", "journal_mode", "truncate"},
		{"_journal=MEMORY", "journal_mode", "memory"},
		{"_pragma=busy_timeout(3000)", "journal_mode", "wal"},
		{"_pragma=busy_timeout(3000)", "synchronous", "1"},
		{"_pragma=journal_mode(DELETE)", "busy_timeout", "10000"},
		{"cache=private&_txlock=immediate", "busy_timeout", "10000"},
		{"", "busy_timeout", "10000"},
		{"", "journal_mode", "wal"},
		{"", "synchronous", "1"},
	}
	for i, c := range good {
		t.Run("good "+c.query+" "+c.pragma, func(t *testing.T) {
			rawURL := "sqlite:" + filepath.Join(t.TempDir(), "x"+strconv.Itoa(i)+".db")
			if c.query != "" {
				rawURL += "?" + c.query
			}
			db, _, err := Open(context.Background(), rawURL)
			if err != nil {
				t.Fatalf("Open(%q): %v", rawURL, err)
			}
			defer db.Close()
			var got string
			if err := db.QueryRow("PRAGMA " + c.pragma).Scan(&got); err != nil {
				t.Fatal(err)
			}
			if got != c.want {
				t.Errorf("Open(%q): PRAGMA %s = %s, want %s", rawURL, c.pragma, got, c.want)
			}
		})
	}
	_, dsn, _, err := DriverDSN("sqlite:x.db?_txlock=deferred")
	if err != nil || strings.Count(dsn, "_txlock=") != 1 || !strings.Contains(dsn, "_txlock=deferred") {
		t.Errorf("DriverDSN(sqlite:x.db?_txlock=deferred) = %q, %v; want the URL's _txlock alone", dsn, err)
	}
	bad := []struct {
		query string
		names []string // what the error must name
	}{
		{"_busy_timout=5000", []string{`"_busy_timout"`}},
		{"busy_timeout=5000", []string{`"busy_timeout"`}},
		{"_pragma=foreign_keys(1)&_pragm=cache_size(-4000)", []string{`"_pragm"`}},
		{"foo=bar&_journal_mod=WAL", []string{`"_journal_mod"`, `"foo"`}},
		{"_PRAGMA=foreign_keys(1)", []string{`"_PRAGMA"`}},
		{"_pragma=foreign_keys(1);x", []string{"do not parse", "semicolon"}},
		{"_pragma=100%", []string{"do not parse"}},
	}
	for _, c := range bad {
		t.Run("bad "+c.query, func(t *testing.T) {
			dir := t.TempDir()
			rawURL := "sqlite:" + filepath.Join(dir, "x.db") + "?" + c.query
			db, _, err := Open(context.Background(), rawURL)
			if err == nil {
				db.Close()
				t.Fatalf("Open(%q) took the URL, want ErrBadURL", rawURL)
			}
			if !errors.Is(err, ErrBadURL) {
				t.Errorf("Open(%q) error = %v, want ErrBadURL", rawURL, err)
			}
			for _, s := range c.names {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("Open(%q) error %q does not name %s", rawURL, err, s)
				}
			}
			if !strings.Contains(c.names[0], "parse") && !strings.Contains(err.Error(), "_busy_timeout, ") {
				t.Errorf("Open(%q) error %q does not list the accepted options", rawURL, err)
			}
			entries, err := os.ReadDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			if len(entries) != 0 {
				t.Errorf("Open(%q) made files in %s: %v", rawURL, dir, entries)
			}
		})
	}
}

// TestDriverDSNErrorHidesQueryPassword: the URL quoted in DriverDSN's
// errors hides a password given as a query parameter too, not only the
// user info's (it showed ?password=… as written).
func TestDriverDSNErrorHidesQueryPassword(t *testing.T) {
	t.Parallel()
	for _, raw := range []string{
		"postgress://u@h/db?password=hunter22",
		"postgress://u:hunter22@h/db?sslmode=disable&password=hunter22",
		"mysql://u@h:1/?password=hunter22",
	} {
		_, _, _, err := DriverDSN(raw)
		if err == nil {
			t.Fatalf("DriverDSN(%q) accepted it", raw)
		}
		if strings.Contains(err.Error(), "hunter22") {
			t.Errorf("DriverDSN(%q) error shows the password: %v", raw, err)
		}
	}
}

// TestOpenSQLiteOptionValues: a value that an option of a sqlite: URL does
// not take (a closed set, a boolean, a number of milliseconds, a time zone)
// is refused when the URL is parsed, with ErrBadURL naming the option, the
// value and the values it takes, and no file is made; it was reported only
// when the driver connected, after it had made an empty database file,
// with the advice to check that the server runs. The values it takes, in
// any case where the driver ignores case, open the database.
func TestOpenSQLiteOptionValues(t *testing.T) {
	good := []string{
		"_txlock=deferred", "_txlock=IMMEDIATE", "_txlock=Exclusive",
		"_journal=wal", "_journal_mode=DELETE", "_journal_mode=truncate",
		"_synchronous=normal", "_sync=3", "_synchronous=EXTRA",
		"_auto_vacuum=incremental", "_vacuum=0",
		"_fk=1", "_fk=on", "_foreign_keys=YES", "_foreign_keys=false", "_query_only=off",
		"_dqs=0", "_defensive=true", "_error_rc=T", "_inttotime=1", "_texttotime=False",
		"_time_format=sqlite", "_time_integer_format=unix_milli",
		"_busy_timeout=5000", "_timeout=0", "_timezone=Europe/Paris", "_timezone=UTC",
		"cache=private", "cache=shared", "mode=rwc", "psow=1", "nolock=off", "immutable=0", "psow=2",
	}
	for i, q := range good {
		t.Run("good "+q, func(t *testing.T) {
			rawURL := "sqlite:" + filepath.Join(t.TempDir(), "g"+strconv.Itoa(i)+".db") + "?" + q
			db, _, err := Open(context.Background(), rawURL)
			if err != nil {
				t.Fatalf("Open(%q): %v", rawURL, err)
			}
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
		})
	}
	bad := []struct {
		query string
		names []string // what the error must name: the option, the value, the values it takes
	}{
		{"_txlock=soon", []string{`_txlock="soon"`, "deferred, immediate, exclusive"}},
		{"_txlock=", []string{`_txlock=""`, "deferred, immediate, exclusive"}},
		{"_txlock=immediate&_txlock=later", []string{`_txlock="later"`}},
		{"_journal=wall", []string{`_journal="wall"`, "DELETE, TRUNCATE, PERSIST, MEMORY, WAL, OFF"}},
		{"_journal_mode=fast", []string{`_journal_mode="fast"`, "WAL"}},
		{"_journal_mode=WAL&_journal=fast", []string{`_journal="fast"`}},
		{"_synchronous=4", []string{`_synchronous="4"`, "NORMAL", "EXTRA"}},
		{"_sync=half", []string{`_sync="half"`, "NORMAL"}},
		{"_auto_vacuum=yes", []string{`_auto_vacuum="yes"`, "INCREMENTAL"}},
		{"_fk=2", []string{`_fk="2"`, "0, 1, false, true, no, yes, off, on"}},
		{"_foreign_keys=enabled", []string{`_foreign_keys="enabled"`, "yes"}},
		{"_query_only=y", []string{`_query_only="y"`}},
		{"_dqs=no", []string{`_dqs="no"`, "1, t, T, TRUE, true, True, 0, f, F, FALSE, false, False"}},
		{"_defensive=on", []string{`_defensive="on"`}},
		{"_inttotime=yes", []string{`_inttotime="yes"`}},
		{"_time_format=iso", []string{`_time_format="iso"`, "sqlite, datetime, string_no_monotonic"}},
		{"_time_integer_format=unix_pico", []string{`_time_integer_format="unix_pico"`, "unix_nano"}},
		{"_busy_timeout=5s", []string{`_busy_timeout="5s"`, "milliseconds"}},
		{"_timeout=", []string{`_timeout=""`, "milliseconds"}},
		{"_timezone=Mars/Olympus", []string{`_timezone="Mars/Olympus"`, "time zone"}},
		{"cache=public", []string{`cache="public"`, "shared, private"}},
		{"mode=rwx", []string{`mode="rwx"`, "ro, rw, rwc, memory"}},
		{"psow=maybe", []string{`psow="maybe"`, "on"}},
	}
	for _, c := range bad {
		t.Run("bad "+c.query, func(t *testing.T) {
			dir := t.TempDir()
			rawURL := "sqlite:" + filepath.Join(dir, "x.db") + "?" + c.query
			db, _, err := Open(context.Background(), rawURL)
			if err == nil {
				db.Close()
				t.Fatalf("Open(%q) took the URL, want ErrBadURL", rawURL)
			}
			if !errors.Is(err, ErrBadURL) || strings.Contains(err.Error(), "server runs") {
				t.Errorf("Open(%q) error = %v, want ErrBadURL, without advice about a server", rawURL, err)
			}
			for _, s := range c.names {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("Open(%q) error %q does not name %s", rawURL, err, s)
				}
			}
			entries, err := os.ReadDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			if len(entries) != 0 {
				t.Errorf("Open(%q) made files in %s: %v", rawURL, dir, entries)
			}
		})
	}
}
