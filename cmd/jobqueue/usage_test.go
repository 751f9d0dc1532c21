package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
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
		{"enqueue bad payload", []string{"enqueue", "--name", "k", "--payload", "{nope"}, []string{"--payload is not valid JSON"}},
		{"enqueue bad --at", []string{"enqueue", "--name", "k", "--at", "tomorrow"}, []string{"--at", "RFC 3339"}},
		{"enqueue --at and --delay", []string{"enqueue", "--name", "k", "--at", "2030-01-01T00:00:00Z", "--delay", "1m"}, []string{"--at and --delay", "give one"}},
		{"enqueue empty --at", []string{"enqueue", "--name", "k", "--at", ""}, []string{"--at", "RFC 3339"}},
		{"enqueue empty --expires-in", []string{"enqueue", "--name", "k", "--expires-in", ""}, []string{"--expires-in", "not a duration"}},
		{"enqueue --expires-at and --expires-in", []string{"enqueue", "--name", "k", "--expires-at", "2030-01-01T00:00:00Z", "--expires-in", "1m"}, []string{"--expires-at and --expires-in", "give one"}},
		{"enqueue bad --delay", []string{"enqueue", "--name", "k", "--delay", "soon"}, []string{"--delay", "not a duration"}},
		{"enqueue partial policy", []string{"enqueue", "--name", "k", "--max-attempts", "3"}, []string{"all three", "missing --base-delay, --max-delay"}},
		{"enqueue partial policy without --max-attempts", []string{"enqueue", "--name", "k", "--base-delay", "3", "--max-delay", "9"}, []string{"all three", "missing --max-attempts"}},
		{"enqueue zero policy", []string{"enqueue", "--name", "k", "--max-attempts", "0", "--base-delay", "1", "--max-delay", "1"}, []string{"invalid retry policy"}},
		{"enqueue --max-attempts not a number", []string{"enqueue", "--name", "k", "--max-attempts", "three"}, []string{"max-attempts"}},
		{"enqueue --base-delay past the INT column", []string{"enqueue", "--name", "k", "--max-attempts", "3", "--base-delay", "3000000000", "--max-delay", "60"}, []string{"--base-delay", "2147483647"}},
		{"enqueue --max-delay past time.Duration", []string{"enqueue", "--name", "k", "--max-attempts", "3", "--base-delay", "1", "--max-delay", "9999999999999"}, []string{"--max-delay", "2147483647"}},
		{"enqueue --delay in days past time.Duration", []string{"enqueue", "--name", "k", "--delay", "213600d"}, []string{"--delay", "too long"}},
		{"enqueue --expires-in in days past time.Duration", []string{"enqueue", "--name", "k", "--expires-in", "110000d"}, []string{"--expires-in", "too long"}},
		{"migrate --base-delay past the INT column", []string{"migrate", "--max-attempts", "3", "--base-delay", "3000000000", "--max-delay", "60"}, []string{"--base-delay", "2147483647"}},
		{"migrate without policy", []string{"migrate"}, []string{"max-attempts", "base-delay", "max-delay", "not set"}},
		{"migrate partial policy", []string{"migrate", "--max-attempts", "3", "--base-delay", "60"}, []string{"max-delay"}},
		{"migrate zero delay", []string{"migrate", "--max-attempts", "3", "--base-delay", "0", "--max-delay", "60"}, []string{"invalid retry policy"}},
		{"list bad status", []string{"list", "--status", "done"}, []string{`--status "done"`}},
		{"list bad limit", []string{"list", "--limit", "0"}, []string{"--limit"}},
		{"list limit above the maximum", []string{"list", "--limit", "100001"}, []string{"--limit", "1 to 100000"}},
		{"list negative --after-id", []string{"list", "--after-id", "-1"}, []string{"--after-id", "negative"}},
		{"show without id", []string{"show"}, []string{"accepts 1 arg"}},
		{"show bad id", []string{"show", "abc"}, []string{`"abc" is not a job id`}},
		{"retry bad id", []string{"retry", "0"}, []string{"not a job id"}},
		{"prune without --older-than", []string{"prune"}, []string{`"older-than" not set`}},
		{"prune bad duration", []string{"prune", "--older-than", "a while"}, []string{"--older-than", "not a duration"}},
		{"prune duration in days past time.Duration", []string{"prune", "--older-than", "200000d"}, []string{"--older-than", "too long"}},
		{"work without --exec", []string{"work"}, []string{`"exec" not set`}},
		{"work with an empty --exec", []string{"work", "--exec", " "}, []string{"--exec", "empty"}},
		{"work with an empty --type", []string{"work", "--exec", "true", "--type", ""}, []string{"--type"}},
		{"work bad concurrency", []string{"work", "--exec", "true", "--concurrency", "0"}, []string{"--concurrency"}},
		{"work bad lease", []string{"work", "--exec", "true", "--lease", "10ms"}, []string{"--lease"}},
		{"bench without flags", []string{"bench"}, []string{"jobs", "workers", "not set"}},
		{"bench bad jobs", []string{"bench", "--jobs", "0", "--workers", "1"}, []string{"--jobs"}},
		{"stray argument", []string{"stats", "extra"}, []string{"unknown command"}},
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
		{"bad table name", "sqlite:" + filepath.Join(t.TempDir(), "x.db"), "jobs; DROP TABLE x", exitUsage, []string{"invalid table name"}},
		{"table name too long for postgres", "postgres://postgres@127.0.0.1:1/test", strings.Repeat("a", 51), exitUsage, []string{"invalid table name", "51 characters"}},
		{"unreachable postgres", "postgres://postgres@127.0.0.1:1/test?sslmode=disable", "", exitFailure, []string{"cannot reach the postgres database", "check that the server runs"}},
		{"unreachable mysql", "mysql://root:secret@127.0.0.1:1/test", "", exitFailure, []string{"cannot reach the mysql database", "check that the server runs"}},
		{"bad mysql option", "mysql://root:secret@127.0.0.1:1/test?timeout=soon", "", exitUsage, []string{"soon", "--db"}},
		{"bad postgres option", "postgres://u:secret@127.0.0.1:1/test?sslmode=bogus", "", exitUsage, []string{"sslmode", "--db"}},
		// Every case here checks that the password "secret" is not shown.
		{"unknown scheme with a password", "postgress://u:secret@127.0.0.1:1/test", "", exitUsage, []string{`unknown scheme "postgress"`, "u:xxxxx@"}},
		{"mysql without database, with a password", "mysql://root:secret@127.0.0.1:3306/", "", exitUsage, []string{"names no database"}},
		{"unparsable URL with a password", "mysql://u:secret@[::1/test", "", exitUsage, []string{"bad database URL"}},
		{"bad escape in a password", "postgres://u:secret%zz@127.0.0.1:1/test", "", exitUsage, []string{"bad database URL"}},
		{"password with an @", "mysql://u:se@secret@127.0.0.1:1/test", "", exitFailure, []string{"cannot reach the mysql database"}},
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
