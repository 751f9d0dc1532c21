package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jobqueue/jobqueue/internal/testdb"
)

// TestUsageErrors checks that bad usage exits 2 with one line on stderr
// that says what is wrong, before any database is touched.
func TestUsageErrors(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		args []string
		want []string // substrings of the error line
	}{
		{"no command", nil, []string{"no command"}},
		{"unknown command", []string{"frobnicate"}, []string{`unknown command "frobnicate"`}},
		{"unknown flag", []string{"stats", "--colour"}, []string{"unknown flag: --colour", "jobqueue stats --help"}},
		{"unknown global flag", []string{"--dbb", "x", "stats"}, []string{"unknown flag: --dbb"}},
		{"enqueue without --name", []string{"enqueue"}, []string{`"name" not set`}},
		{"enqueue bad payload", []string{"enqueue", "--name", "k", "--payload", "{nope"}, []string{`--payload "{nope" is not valid JSON`, `e.g. --payload '{"to":"a@example.com"}'`}},
		// It read "--payload is not valid JSON:; see …".
		{"enqueue empty payload", []string{"enqueue", "--name", "k", "--payload", ""}, []string{`--payload "" is not valid JSON`, "leave it out for {}"}},
		{"enqueue bad --at", []string{"enqueue", "--name", "k", "--at", "tomorrow"}, []string{"--at", "RFC 3339"}},
		{"enqueue --at and --delay", []string{"enqueue", "--name", "k", "--at", "2030-01-01T00:00:00Z", "--delay", "1m"}, []string{"--at and --delay", "give one"}},
		{"enqueue empty --at", []string{"enqueue", "--name", "k", "--at", ""}, []string{"--at", "RFC 3339"}},
		{"enqueue empty --expires-in", []string{"enqueue", "--name", "k", "--expires-in", ""}, []string{"--expires-in", "not a duration"}},
		{"enqueue --expires-at and --expires-in", []string{"enqueue", "--name", "k", "--expires-at", "2030-01-01T00:00:00Z", "--expires-in", "1m"}, []string{"--expires-at and --expires-in", "give one"}},
		// These were refused by the queue, after the database was opened,
		// in the Go API's words ("invalid job: the deadline … is before
		// the scheduled time …").
		{"enqueue --expires-at before --at", []string{"enqueue", "--name", "k", "--at", "2030-01-02T00:00:00Z", "--expires-at", "2030-01-01T00:00:00Z"}, []string{"--expires-at 2030-01-01T00:00:00Z is before the job may run (--at 2030-01-02T00:00:00Z)", "expire unrun", "later deadline"}},
		{"enqueue --expires-in shorter than --delay", []string{"enqueue", "--name", "k", "--delay", "2h", "--expires-in", "1h"}, []string{"--expires-in 1h is before the job may run (--delay 2h from now)", "expire unrun"}},
		{"enqueue --expires-at before --delay", []string{"enqueue", "--name", "k", "--delay", "1d", "--expires-at", "2026-01-01T00:00:00Z"}, []string{"--expires-at 2026-01-01T00:00:00Z is before the job may run (--delay 1d from now)"}},
		{"enqueue --expires-in before --at", []string{"enqueue", "--name", "k", "--at", "9999-01-01T00:00:00Z", "--expires-in", "1h"}, []string{"--expires-in 1h is before the job may run (--at 9999-01-01T00:00:00Z)"}},
		{"enqueue --expires-at passed", []string{"enqueue", "--name", "k", "--expires-at", "2020-01-01T00:00:00Z"}, []string{"--expires-at 2020-01-01T00:00:00Z has passed", "expire unrun", "leave the flag out"}},
		{"enqueue --at in year 0", []string{"enqueue", "--name", "k", "--at", "0000-12-31T00:00:00Z"}, []string{"--at 0000-12-31T00:00:00Z", "years 1 to 9999"}},
		{"enqueue --expires-at in year 0", []string{"enqueue", "--name", "k", "--expires-at", "0000-12-31T00:00:00Z"}, []string{"--expires-at 0000-12-31T00:00:00Z", "years 1 to 9999"}},
		{"enqueue bad --delay", []string{"enqueue", "--name", "k", "--delay", "soon"}, []string{"--delay", "not a duration"}},
		{"enqueue partial policy", []string{"enqueue", "--name", "k", "--max-attempts", "3"}, []string{"all three", "missing --base-delay, --max-delay"}},
		{"enqueue partial policy without --max-attempts", []string{"enqueue", "--name", "k", "--base-delay", "3", "--max-delay", "9"}, []string{"all three", "missing --max-attempts"}},
		{"enqueue zero policy", []string{"enqueue", "--name", "k", "--max-attempts", "0", "--base-delay", "1", "--max-delay", "1"}, []string{"invalid retry policy", "--max-attempts is 0", "at least 1"}},
		// These quoted strconv: "invalid argument \"three\" for
		// \"--max-attempts\" flag: strconv.ParseInt: parsing …".
		{"enqueue --max-attempts not a number", []string{"enqueue", "--name", "k", "--max-attempts", "three"}, []string{`--max-attempts "three" is not a whole number`}},
		{"list --limit not a number", []string{"list", "--limit", "ten"}, []string{`--limit "ten" is not a whole number`, "--limit 100"}},
		{"list --after-id past int64", []string{"list", "--after-id", "99999999999999999999"}, []string{"--after-id 99999999999999999999 is too large"}},
		{"stats --json with a value", []string{"stats", "--json=yes"}, []string{`--json="yes"`, "--json alone"}},
		{"enqueue --base-delay past the INT column", []string{"enqueue", "--name", "k", "--max-attempts", "3", "--base-delay", "3000000000", "--max-delay", "60"}, []string{"--base-delay", "2147483647"}},
		{"enqueue --max-delay past time.Duration", []string{"enqueue", "--name", "k", "--max-attempts", "3", "--base-delay", "1", "--max-delay", "9999999999999"}, []string{"--max-delay", "2147483647"}},
		{"enqueue --delay in days past time.Duration", []string{"enqueue", "--name", "k", "--delay", "213600d"}, []string{"--delay", "too long"}},
		// It said "not a duration; write it like 90s".
		{"enqueue --delay in hours past time.Duration", []string{"enqueue", "--name", "k", "--delay", "3000000h"}, []string{"--delay", "too long"}},
		{"enqueue --expires-in in days past time.Duration", []string{"enqueue", "--name", "k", "--expires-in", "110000d"}, []string{"--expires-in", "too long"}},
		{"migrate --base-delay past the INT column", []string{"migrate", "--max-attempts", "3", "--base-delay", "3000000000", "--max-delay", "60"}, []string{"--base-delay", "2147483647"}},
		{"migrate without policy", []string{"migrate"}, []string{"max-attempts", "base-delay", "max-delay", "not set"}},
		{"migrate partial policy", []string{"migrate", "--max-attempts", "3", "--base-delay", "60"}, []string{"max-delay"}},
		{"migrate zero delay", []string{"migrate", "--max-attempts", "3", "--base-delay", "0", "--max-delay", "60"}, []string{"invalid retry policy", "--base-delay is 0", "at least 1"}},
		// It named the Go API's fields (MaxDelay is -5s).
		{"migrate negative max delay", []string{"migrate", "--max-attempts", "3", "--base-delay", "1", "--max-delay", "-5"}, []string{"invalid retry policy", "--max-delay is -5", "at least 1"}},
		// These listed or counted nothing, exit 0: an empty filter (an
		// unset shell variable) or one no job can match.
		{"list empty --status", []string{"list", "--status", ""}, []string{"--status is empty", "leave it out for every status"}},
		{"list empty --type", []string{"list", "--type", ""}, []string{"--type is empty", "leave it out for every type"}},
		{"list empty --name", []string{"list", "--name", ""}, []string{"--name is empty", "leave it out for every kind"}},
		{"stats empty --type", []string{"stats", "--type", ""}, []string{"--type is empty", "leave it out for every type"}},
		{"list --type too long", []string{"list", "--type", strings.Repeat("t", 65)}, []string{"--type", "65 characters", "at most 64"}},
		{"list --name too long", []string{"list", "--name", strings.Repeat("k", 256)}, []string{"--name", "256 characters", "at most 255"}},
		{"list --name not UTF-8", []string{"list", "--name", "e\xffmail"}, []string{"--name", "not valid UTF-8"}},
		{"stats --type ending with a space", []string{"stats", "--type", "email "}, []string{"--type", "ends with a space"}},
		{"list bad status", []string{"list", "--status", "done"}, []string{`--status "done"`}},
		{"list bad limit", []string{"list", "--limit", "0"}, []string{"--limit"}},
		{"list limit above the maximum", []string{"list", "--limit", "100001"}, []string{"--limit", "1 to 100000"}},
		{"list negative --after-id", []string{"list", "--after-id", "-1"}, []string{"--after-id", "negative"}},
		// These said "accepts 1 arg(s), received 0" and "requires at least
		// 1 arg(s), only received 0".
		{"show without id", []string{"show"}, []string{"'jobqueue show' needs a job id", "jobqueue show 42"}},
		{"show with two ids", []string{"show", "1", "2"}, []string{`unexpected argument "2"`, "'jobqueue show' takes one job id"}},
		{"retry without id", []string{"retry"}, []string{"'jobqueue retry' needs at least one job id", "jobqueue retry 42 43"}},
		{"show bad id", []string{"show", "abc"}, []string{`"abc" is not a job id`}},
		{"retry bad id", []string{"retry", "0"}, []string{"not a job id"}},
		{"prune without --older-than", []string{"prune"}, []string{`"older-than" not set`}},
		{"prune bad duration", []string{"prune", "--older-than", "a while"}, []string{"--older-than", "not a duration"}},
		{"prune duration in days past time.Duration", []string{"prune", "--older-than", "200000d"}, []string{"--older-than", "too long"}},
		{"work without --exec", []string{"work"}, []string{`"exec" not set`}},
		{"work with an empty --exec", []string{"work", "--exec", " "}, []string{"--exec", "empty"}},
		{"work with an empty --type", []string{"work", "--exec", "true", "--type", ""}, []string{"--type"}},
		{"work with a --type too long", []string{"work", "--exec", "true", "--type", "email", "--type", strings.Repeat("t", 65)}, []string{"--type", "65 characters", "at most 64"}},
		{"work with a --type ending with a space", []string{"work", "--exec", "true", "--type", "email "}, []string{"--type", "ends with a space"}},
		{"work with a --type not UTF-8", []string{"work", "--exec", "true", "--type", "e\xffmail"}, []string{"--type", "not valid UTF-8"}},
		{"work bad concurrency", []string{"work", "--exec", "true", "--concurrency", "0"}, []string{"--concurrency"}},
		{"work concurrency above the maximum", []string{"work", "--exec", "true", "--concurrency", "10001"}, []string{"--concurrency 10001", "1 to 10000"}},
		{"work huge concurrency", []string{"work", "--exec", "true", "--concurrency", "100000000"}, []string{"--concurrency 100000000", "1 to 10000"}},
		{"work bad lease", []string{"work", "--exec", "true", "--lease", "10ms"}, []string{"--lease"}},
		{"work --run-missed without --periodic", []string{"work", "--exec", "true", "--run-missed"}, []string{"--run-missed needs --periodic"}},
		{"bench without flags", []string{"bench"}, []string{"jobs", "workers", "not set"}},
		{"bench bad jobs", []string{"bench", "--jobs", "0", "--workers", "1"}, []string{"--jobs"}},
		{"bench jobs above the maximum", []string{"bench", "--jobs", "10000001", "--workers", "1"}, []string{"--jobs 10000001", "1 to 10000000"}},
		{"bench workers above the maximum", []string{"bench", "--jobs", "1", "--workers", "10001"}, []string{"--workers 10001", "1 to 10000"}},
		{"bench processes above the maximum", []string{"bench", "--jobs", "1", "--workers", "1", "--processes", "65"}, []string{"--processes 65", "1 to 64"}},
		{"bench enqueuers above the maximum", []string{"bench", "--jobs", "1", "--workers", "1", "--latency-jobs", "0", "--enqueuers", "1001"}, []string{"--enqueuers 1001", "0 to 1000"}},
		{"bench negative enqueuers", []string{"bench", "--jobs", "1", "--workers", "1", "--enqueuers", "-1"}, []string{"--enqueuers -1", "0 to 1000"}},
		{"bench latency jobs above the maximum", []string{"bench", "--jobs", "1", "--workers", "1", "--latency-jobs", "100001"}, []string{"--latency-jobs 100001", "0 to 100000"}},
		{"bench-worker workers above the maximum", []string{"bench-worker", "--workers", "10001"}, []string{"--workers 10001", "1 to 10000"}},
		// A stray argument is no command: it was "unknown command".
		{"stray argument", []string{"stats", "extra"}, []string{`unexpected argument "extra"`, "'jobqueue stats' takes no arguments"}},
		{"enqueue with an unquoted payload", []string{"enqueue", "--name", "k", "--payload", `{"to":`, `"a@example.com"}`}, []string{`unexpected argument "\"a@example.com\"}"`, "quote a value"}},
		{"install with an argument", []string{"install", "jobs"}, []string{`unexpected argument "jobs"`, "'jobqueue install' takes no arguments"}},
		{"web with an argument", []string{"web", "127.0.0.1:8080"}, []string{`unexpected argument "127.0.0.1:8080"`, "'jobqueue web' takes no arguments"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dbFile := filepath.Join(t.TempDir(), "never.db")
			r := cli{db: "sqlite:" + dbFile}.run(t, tc.args...)
			assertOneLineError(t, r, exitUsage, tc.want...)
			if r.stdout != "" {
				t.Errorf("stdout is not empty: %q", r.stdout)
			}
			if _, err := os.Stat(dbFile); err == nil {
				t.Errorf("bad usage created the database file %s", dbFile)
			}
		})
	}
}

// TestEnqueueFlagsBeforeDatabase: enqueue's --name and --type that no job
// can have are usage errors (exit 2) naming the flag, told before the
// database is opened: with an unreachable one, a --name of 256 characters
// or a --type of 65 was exit 1 and said only that the server could not be
// reached.
func TestEnqueueFlagsBeforeDatabase(t *testing.T) {
	t.Parallel()
	unreachable := cli{db: "postgres://postgres@127.0.0.1:1/test?sslmode=disable"}
	cases := []struct {
		name string
		args []string
		want []string // substrings of the error line
	}{
		{"--name too long", []string{"--name", strings.Repeat("k", 256)}, []string{"--name", "256 characters", "at most 255"}},
		{"--name empty", []string{"--name", ""}, []string{"--name is empty"}},
		{"--name ending with a space", []string{"--name", "report "}, []string{"--name", "ends with a space"}},
		{"--type too long", []string{"--name", "k", "--type", strings.Repeat("t", 65)}, []string{"--type", "65 characters", "at most 64"}},
		{"--type empty", []string{"--name", "k", "--type", ""}, []string{"--type is empty"}},
		{"--type not UTF-8", []string{"--name", "k", "--type", "e\xffmail"}, []string{"--type", "not valid UTF-8"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := unreachable.run(t, append([]string{"enqueue"}, tc.args...)...)
			assertOneLineError(t, r, exitUsage, tc.want...)
			if r.stdout != "" {
				t.Errorf("stdout is not empty: %q", r.stdout)
			}
		})
	}
}

// TestBadDatabase checks bad URLs and table names (usage, exit 2) and
// unreachable servers (failure, exit 1, quickly, without hanging).
func TestBadDatabase(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		db    string
		table string
		code  int
		want  []string
	}{
		{"unknown scheme", "oracle://scott@db/orcl", "", exitUsage, []string{`unknown scheme "oracle"`, "postgres://"}},
		{"not a URL", "jobs.db", "", exitUsage, []string{"bad database URL", "sqlite:PATH"}},
		{"mysql without database", "mysql://root@127.0.0.1:3306/", "", exitUsage, []string{"names no database"}},
		{"mysql without host", "mysql:///test", "", exitUsage, []string{"names no host"}},
		{"sqlite without path", "sqlite:", "", exitUsage, []string{"bad database URL"}},
		{"misspelled sqlite option", "sqlite:" + filepath.Join(t.TempDir(), "x.db") + "?_busy_timout=5000", "", exitUsage, []string{`unknown option "_busy_timout"`, "_busy_timeout, "}},
		{"bad sqlite option value", "sqlite:" + filepath.Join(t.TempDir(), "x.db") + "?_txlock=soon", "", exitUsage, []string{`_txlock="soon"`, "deferred, immediate, exclusive"}},
		{"bad table name", "sqlite:" + filepath.Join(t.TempDir(), "x.db"), "jobs; DROP TABLE x", exitUsage, []string{"invalid table name"}},
		{"table name too long for postgres", "postgres://postgres@127.0.0.1:1/test", strings.Repeat("a", 51), exitUsage, []string{"invalid table name", "51 characters"}},
		{"unreachable postgres", "postgres://postgres@127.0.0.1:1/test?sslmode=disable", "", exitFailure, []string{"cannot reach the postgres database", "check that the server runs"}},
		{"unreachable mysql", "mysql://root:secret@127.0.0.1:1/test", "", exitFailure, []string{"cannot reach the mysql database", "check that the server runs"}},
		{"bad mysql option", "mysql://root:secret@127.0.0.1:1/test?timeout=soon", "", exitUsage, []string{"soon", "--db"}},
		{"bad postgres option", "postgres://u:secret@127.0.0.1:1/test?sslmode=bogus", "", exitUsage, []string{"sslmode", "--db"}},
		{"bad pgx option", "postgres://u:secret@127.0.0.1:1/test?sslmode=disable&default_query_exec_mode=bogus", "", exitUsage, []string{"default_query_exec_mode", "--db"}},
		{"postgres port out of range", "postgres://u:secret@127.0.0.1:99999/test", "", exitUsage, []string{"port"}},
		{"mysql port out of range", "mysql://root:secret@127.0.0.1:99999/test", "", exitUsage, []string{"port 99999", "1 to 65535"}},
		{"mysql port 0", "mysql://root:secret@127.0.0.1:0/test", "", exitUsage, []string{"port 0", "1 to 65535"}},
		// Every case here checks that the password "secret" is not shown.
		{"unknown scheme with a password", "postgress://u:secret@127.0.0.1:1/test", "", exitUsage, []string{`unknown scheme "postgress"`, "u:xxxxx@"}},
		{"mysql without database, with a password", "mysql://root:secret@127.0.0.1:3306/", "", exitUsage, []string{"names no database"}},
		{"unparsable URL with a password", "mysql://u:secret@[::1/test", "", exitUsage, []string{"bad database URL"}},
		{"bad escape in a password", "postgres://u:secret%zz@127.0.0.1:1/test", "", exitUsage, []string{"bad database URL"}},
		// net/url refuses these passwords, and its error quotes the URL
		// with %q, escaping '"' and '\'.
		{"a quote in a mysql password", `mysql://u:secret"@127.0.0.1:1/test`, "", exitUsage, []string{"bad database URL", "percent-encode"}},
		{"a quote in a postgres password", `postgres://u:"secret@127.0.0.1:1/test`, "", exitUsage, []string{"bad database URL", "percent-encode"}},
		{"a backslash in a password", `mysql://u:secret\@127.0.0.1:1/test`, "", exitUsage, []string{"bad database URL", "percent-encode"}},
		{"a # in a password", `postgres://u:secret#1@127.0.0.1:1/test`, "", exitUsage, []string{"bad database URL", "percent-encode"}},
		// Only the password is hidden, not the same letters elsewhere.
		{"a short password", "postgres://u:ab@127.0.0.1:1/test?sslmode=disable", "", exitFailure, []string{"cannot reach the postgres database", "postgres://u:xxxxx@127.0.0.1:1/test?sslmode=disable"}},
		{"password with an @", "mysql://u:se@secret@127.0.0.1:1/test", "", exitFailure, []string{"cannot reach the mysql database"}},
		// pgx, unlike net/url and go-sql-driver/mysql, would end this user
		// info at the first '@' and dial "secret@127.0.0.1".
		{"postgres password with an @", "postgres://u:se@secret@127.0.0.1:1/test", "", exitUsage, []string{"bad database URL", "percent-encode", "%40"}},
		{"password in the query", "postgres://postgres@127.0.0.1:1/test?sslmode=disable&password=secret", "", exitFailure, []string{"cannot reach the postgres database", "password=xxxxx"}},
		{"password in the query and user info", "postgres://u:secret@127.0.0.1:1/test?password=secret&sslmode=disable", "", exitFailure, []string{"cannot reach the postgres database"}},
		{"sqlite in a missing directory", "sqlite:" + filepath.Join(t.TempDir(), "no", "such", "dir", "x.db"), "", exitFailure, []string{"sqlite"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			start := time.Now()
			r := cli{db: tc.db, table: tc.table, timeout: 30 * time.Second}.run(t, "install")
			assertOneLineError(t, r, tc.code, tc.want...)
			if strings.Contains(r.stderr, "secret") {
				t.Errorf("the error shows the password: %q", r.stderr)
			}
			if d := time.Since(start); d > 15*time.Second {
				t.Errorf("took %v to fail", d)
			}
		})
	}
}

// TestHelp checks that every command has --help (exit 0, on stdout).
func TestHelp(t *testing.T) {
	t.Parallel()
	for _, cmd := range []string{"", "install", "migrate", "uninstall", "enqueue", "stats", "list", "show", "retry", "cancel", "delete", "expire", "reclaim", "prune", "leader", "work", "web", "goose-file", "demo", "bench"} {
		t.Run("help "+cmd, func(t *testing.T) {
			t.Parallel()
			args := []string{"--help"}
			if cmd != "" {
				args = []string{cmd, "--help"}
			}
			r := cli{}.run(t, args...)
			if r.code != 0 || r.stderr != "" {
				t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
			}
			if !strings.Contains(r.stdout, "Usage:") || !strings.Contains(r.stdout, "--db") {
				t.Errorf("help of %q lacks usage or the global flags:\n%s", cmd, r.stdout)
			}
		})
	}
}

// TestDatabaseChoice checks where the database comes from: --db, else
// $JOBQUEUE_DB, else sqlite:jobqueue.db in the working directory.
func TestDatabaseChoice(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	envDB := filepath.Join(dir, "from-env.db")
	flagDB := filepath.Join(dir, "from-flag.db")
	exists := func(path string) bool { _, err := os.Stat(path); return err == nil }

	cli{dir: dir}.ok(t, "install")
	if !exists(filepath.Join(dir, "jobqueue.db")) {
		t.Error("without --db or $JOBQUEUE_DB, install did not create jobqueue.db in the working directory")
	}
	cli{dir: dir, env: []string{"JOBQUEUE_DB=sqlite:" + envDB}}.ok(t, "install")
	if !exists(envDB) {
		t.Error("install did not use $JOBQUEUE_DB")
	}
	cli{dir: dir, db: "sqlite://" + flagDB, env: []string{"JOBQUEUE_DB=sqlite:" + envDB + ".not"}}.ok(t, "install")
	if !exists(flagDB) || exists(envDB+".not") {
		t.Error("--db did not take precedence over $JOBQUEUE_DB")
	}
}

// TestMissingTable checks that commands on a table that was never
// installed fail (exit 1) with an error naming install.
func TestMissingTable(t *testing.T) {
	t.Parallel()
	c := cli{db: "sqlite:" + filepath.Join(t.TempDir(), "empty.db"), table: "nothing_here"}
	for _, args := range [][]string{{"stats"}, {"enqueue", "--name", "k"}, {"list"}, {"work", "--exec", "true"}} {
		assertOneLineError(t, c.run(t, args...), exitFailure, "no table nothing_here", "jobqueue install --table nothing_here")
	}
}

// TestForeignTable checks that the commands on a table of the name that is
// not a jobqueue table (another program's) fail (exit 1) saying so and to
// choose another --table, without sending the user to 'jobqueue migrate'
// (which refuses such a table) or to the Go API, and leave it as it was.
func TestForeignTable(t *testing.T) {
	t.Parallel()
	testdb.ForEachEngine(t, func(t *testing.T, e *testdb.Env) {
		c := cli{db: e.URL, table: e.Table(t)}
		q := parseTable(t, e.Kind, c.table).Quoted()
		for _, stmt := range []string{"CREATE TABLE " + q + " (id INT PRIMARY KEY, note VARCHAR(20))", "INSERT INTO " + q + " (id, note) VALUES (1, 'keep me')"} {
			if _, err := e.DB.ExecContext(context.Background(), stmt); err != nil {
				t.Fatal(err)
			}
		}
		for _, args := range [][]string{{"stats"}, {"enqueue", "--name", "k"}, {"list"}, {"show", "1"}, {"leader"}, {"work", "--exec", "true"}, {"install"}} {
			r := c.run(t, args...)
			assertOneLineError(t, r, exitFailure, "not a jobqueue table", "choose another name with --table")
			for _, wrong := range []string{"jobqueue migrate", "migrations.", "version 1"} {
				if strings.Contains(r.stderr, wrong) {
					t.Errorf("%v: the error says %q, wrong for another program's table: %q", args, wrong, r.stderr)
				}
			}
		}
		var note string
		if err := e.DB.QueryRowContext(context.Background(), "SELECT note FROM "+q+" WHERE id = 1").Scan(&note); err != nil || note != "keep me" {
			t.Errorf("the foreign table's row: %q, %v; want it kept", note, err)
		}
	})
}

// TestSideNameTaken: install and uninstall of a table whose side table's
// name another table holds are refused with the library's message, which
// names that table (the generic "not a jobqueue table" of the jobs table
// would send the user to rename the wrong one), and the other table keeps
// its row.
func TestSideNameTaken(t *testing.T) {
	t.Parallel()
	testdb.ForEachEngine(t, func(t *testing.T, e *testdb.Env) {
		c := cli{db: e.URL, table: e.Table(t)}
		side := c.table + "_leader"
		t.Cleanup(func() { testdb.Drop(t, e.DB, side) })
		q := parseTable(t, e.Kind, side).Quoted()
		for _, stmt := range []string{"CREATE TABLE " + q + " (id INT PRIMARY KEY, note VARCHAR(20))", "INSERT INTO " + q + " (id, note) VALUES (1, 'keep me')"} {
			if _, err := e.DB.ExecContext(context.Background(), stmt); err != nil {
				t.Fatal(err)
			}
		}
		for _, args := range [][]string{{"install"}, {"uninstall"}} {
			assertOneLineError(t, c.run(t, args...), exitFailure, side, "rename")
		}
		var note string
		if err := e.DB.QueryRowContext(context.Background(), "SELECT note FROM "+q+" WHERE id = 1").Scan(&note); err != nil || note != "keep me" {
			t.Errorf("the other table's row: %q, %v; want it kept", note, err)
		}
	})
}

// TestUnwritableStdout checks that a command whose output cannot be
// written (stdout on a full disk) fails (exit 1) saying so, rather than
// exiting 0 with its output lost: enqueue says which job it enqueued (or
// which one it found for the unique key), since its id is its only output.
func TestUnwritableStdout(t *testing.T) {
	t.Parallel()
	full, err := os.OpenFile("/dev/full", os.O_WRONLY, 0)
	if err != nil {
		t.Skip("no /dev/full:", err)
	}
	defer full.Close()
	c := cli{db: "sqlite:" + filepath.Join(t.TempDir(), "full.db"), table: "full_stdout"}
	c.ok(t, "install")
	if id := strings.TrimSpace(c.ok(t, "enqueue", "--name", "k", "--unique-key", "u")); id != "1" {
		t.Fatalf("the first job's id is %s, want 1", id)
	}
	cases := []struct {
		args []string
		want []string
	}{
		{[]string{"enqueue", "--name", "k"}, []string{"job 2 was enqueued but its id could not be printed", "no space left"}},
		{[]string{"enqueue", "--name", "k", "--unique-key", "u"}, []string{"duplicate of 1", "nothing was enqueued", "its id could not be printed"}},
		{[]string{"leader"}, []string{"no space left"}},
		{[]string{"leader", "--json"}, []string{"no space left"}},
		{[]string{"stats"}, []string{"no space left"}},
		{[]string{"stats", "--json"}, []string{"no space left"}},
		{[]string{"list"}, []string{"no space left"}},
		{[]string{"show", "1"}, []string{"no space left"}},
		// Commands that print a line after their work: the work is done,
		// the line is lost, the exit says so.
		{[]string{"install"}, []string{"output could not be written", "no space left"}},
		{[]string{"cancel", "1"}, []string{"no space left"}},
	}
	toFull := c
	toFull.stdout = full
	for _, tc := range cases {
		assertOneLineError(t, toFull.run(t, tc.args...), exitFailure, tc.want...)
	}
	if out := c.ok(t, "list", "--json"); strings.Count(out, `"id":`) != 2 {
		t.Errorf("want the two jobs enqueued, the duplicate not: %s", out)
	}
}

// TestSQLitePath checks that sqlite:PATH (and sqlite://PATH) uses the file
// named PATH exactly, whatever characters it holds: a '#' does not cut it
// short (opening another file), a "%20" is not decoded, spaces and other
// characters are kept.
func TestSQLitePath(t *testing.T) {
	t.Parallel()
	// Each file in a directory of its own under one temp dir (a subtest's
	// temp dir is named after it: a '#' there would put a wrongly opened
	// file outside it).
	root := t.TempDir()
	for i, name := range []string{"we#ird.db", "a%20b.db", "50%.db", "with space.db", "it's (1) & [2].db", "ünï.db"} {
		for j, prefix := range []string{"sqlite:", "sqlite://"} {
			t.Run(prefix+name, func(t *testing.T) {
				t.Parallel()
				dir := filepath.Join(root, fmt.Sprintf("%d-%d", i, j))
				if err := os.Mkdir(dir, 0o755); err != nil {
					t.Fatal(err)
				}
				c := cli{db: prefix + filepath.Join(dir, name), table: "jobs"}
				c.ok(t, "install")
				c.ok(t, "enqueue", "--name", "k")
				assertStats(t, c, "", map[string]int64{"pending": 1})
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
					t.Errorf("--db %s made the files %q, want %q", c.db, names, name)
				}
			})
		}
	}
}

// TestFlagsOnlyCommandsRefuseArguments: every command but those that take
// job ids answers a stray argument with the unexpected-argument usage error
// (flagsOnly), not cobra's "unknown command", so that a command added later
// with cobra.NoArgs fails here.
func TestFlagsOnlyCommandsRefuseArguments(t *testing.T) {
	t.Parallel()
	takesArgs := map[string]bool{"show": true, "retry": true, "cancel": true, "delete": true, "help": true, "completion": true}
	for _, c := range (&app{}).rootCommand().Commands() {
		name := c.Name()
		if takesArgs[name] {
			continue
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dbFile := filepath.Join(t.TempDir(), "never.db")
			r := cli{db: "sqlite:" + dbFile}.run(t, name, "stray")
			assertOneLineError(t, r, exitUsage, `unexpected argument "stray"`, "'jobqueue "+name+"' takes no arguments")
		})
	}
}
