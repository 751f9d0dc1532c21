package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/jobqueue/jobqueue/internal/ddl"
	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/testdb"
)

// TestCancelDeleteCLI checks `jobqueue cancel` and `jobqueue delete` on
// every engine: a line per id, exit 1 when any id failed, the other ids
// done all the same, bad ids a usage error that changes nothing.
func TestCancelDeleteCLI(t *testing.T) {
	t.Parallel()
	testdb.ForEachEngine(t, func(t *testing.T, e *testdb.Env) {
		c := envCLI(t, e)
		c.ok(t, "install")
		a := strings.TrimSpace(c.ok(t, "enqueue", "--name", "a"))
		b := strings.TrimSpace(c.ok(t, "enqueue", "--name", "b"))

		// A bad id is a usage error before anything changes.
		r := c.run(t, "cancel", a, "x1")
		assertOneLineError(t, r, 2, `"x1" is not a job id`)
		assertStats(t, c, "", map[string]int64{"pending": 2})
		assertOneLineError(t, c.run(t, "delete"), 2, "'jobqueue delete' needs at least one job id")

		out := c.ok(t, "cancel", a)
		if out != "job "+a+" cancelled\n" {
			t.Errorf("cancel printed %q", out)
		}
		var job map[string]any
		decodeJSON(t, c.ok(t, "show", a, "--json"), &job)
		if job["status"] != "failed" || job["error"] != "cancelled" || job["finished_at"] == nil {
			t.Errorf("cancelled job: %v", job)
		}

		// a is finished now, 999999 missing, b pending: b is cancelled,
		// the others told, exit 1.
		r = c.run(t, "cancel", a, "999999", b)
		if r.code != 1 || r.stdout != "job "+b+" cancelled\n" {
			t.Errorf("cancel of finished, missing and pending: exit %d, stdout %q", r.code, r.stdout)
		}
		for _, w := range []string{"job " + a + " is failed", "no job 999999", "2 of 3 job(s) not cancelled"} {
			if !strings.Contains(r.stderr, w) {
				t.Errorf("stderr %q does not say %q", r.stderr, w)
			}
		}
		assertStats(t, c, "", map[string]int64{"failed": 2})

		// Retry runs a cancelled job again.
		c.ok(t, "retry", a)
		assertStats(t, c, "", map[string]int64{"pending": 1, "failed": 1})

		r = c.run(t, "delete", a, b, "999999")
		if r.code != 1 || r.stdout != "job "+a+" deleted\njob "+b+" deleted\n" || !strings.Contains(r.stderr, "no job 999999") {
			t.Errorf("delete: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
		}
		assertStats(t, c, "", map[string]int64{})
	})
}

// TestControlOneIDOneLine: `cancel ID` and `delete ID` of a single job that
// cannot be cancelled or deleted fail as every command does, with exit 1
// and one line on stderr (the job's own error), not that line followed by
// a count of one.
func TestControlOneIDOneLine(t *testing.T) {
	t.Parallel()
	c := cli{db: "sqlite:" + filepath.Join(t.TempDir(), "c.db")}
	c.ok(t, "install")
	done := strings.TrimSpace(c.ok(t, "enqueue", "--name", "a"))
	c.ok(t, "cancel", done)
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"cancel", done}, "job " + done + " is failed"},
		{[]string{"cancel", "999999"}, "no job 999999"},
		{[]string{"delete", "999999"}, "no job 999999"},
	}
	for _, tc := range cases {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			r := c.run(t, tc.args...)
			assertOneLineError(t, r, 1, tc.want)
			if r.stdout != "" {
				t.Errorf("stdout %q, want nothing", r.stdout)
			}
		})
	}
}

// TestEnqueueUniqueCLI checks `enqueue --unique-key` on every engine: a
// duplicate prints the existing id, says "duplicate of ID" on stderr and
// exits 0; bad keys and periods are usage errors; a table without the side
// table fails saying to run install.
func TestEnqueueUniqueCLI(t *testing.T) {
	t.Parallel()
	testdb.ForEachEngine(t, func(t *testing.T, e *testdb.Env) {
		c := envCLI(t, e)
		c.ok(t, "install")
		id := strings.TrimSpace(c.ok(t, "enqueue", "--name", "a", "--unique-key", "k"))
		r := c.run(t, "enqueue", "--name", "b", "--unique-key", "k")
		if r.code != 0 || strings.TrimSpace(r.stdout) != id || !strings.Contains(r.stderr, "duplicate of "+id) {
			t.Errorf("duplicate enqueue: exit %d, stdout %q, stderr %q; want 0, %s, \"duplicate of %s\"", r.code, r.stdout, r.stderr, id, id)
		}
		assertStats(t, c, "", map[string]int64{"pending": 1})
		for _, bad := range [][]string{
			{"--unique-key", ""},
			{"--unique-for", "1h"},
			{"--unique-key", "x", "--unique-for", "-1s"},
			{"--unique-key", "x", "--unique-for", "soon"},
			{"--unique-key", strings.Repeat("x", 256)},
		} {
			r := c.run(t, append([]string{"enqueue", "--name", "c"}, bad...)...)
			if r.code != 2 {
				t.Errorf("enqueue %q: exit %d, want 2; stderr %q", bad, r.code, r.stderr)
			}
		}
		// Delete frees the key, even within its period.
		c.ok(t, "delete", id)
		id2 := strings.TrimSpace(c.ok(t, "enqueue", "--name", "a", "--unique-key", "k", "--unique-for", "1h"))
		if id2 == id {
			t.Errorf("enqueue after delete returned the deleted id %s", id)
		}
		assertStats(t, c, "", map[string]int64{"pending": 1})

		// A table installed before unique keys: the rest works, a keyed
		// enqueue says to install.
		tbl, err := engine.ParseTable(e.Kind, c.table)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.DB.Exec(ddl.DropTable(ddl.Side(tbl, "unique"))); err != nil {
			t.Fatal(err)
		}
		assertOneLineError(t, c.run(t, "enqueue", "--name", "a", "--unique-key", "z"), 1, "jobqueue install --table "+c.table)
		c.ok(t, "enqueue", "--name", "plain")
		c.ok(t, "install")
		c.ok(t, "enqueue", "--name", "a", "--unique-key", "z")
		assertStats(t, c, "", map[string]int64{"pending": 3})
	})
}

// TestRetryManyCLI: `retry` takes many ids, as cancel and delete do: a
// line per id, the failed ones pending again, the others told on stderr
// (a pending job, a missing id), exit 1, and a bad id a usage error that
// changes nothing. It took exactly one id.
func TestRetryManyCLI(t *testing.T) {
	t.Parallel()
	c := cli{db: "sqlite:" + filepath.Join(t.TempDir(), "c.db")}
	c.ok(t, "install")
	a := strings.TrimSpace(c.ok(t, "enqueue", "--name", "a"))
	b := strings.TrimSpace(c.ok(t, "enqueue", "--name", "b"))
	p := strings.TrimSpace(c.ok(t, "enqueue", "--name", "p"))
	c.ok(t, "cancel", a, b)
	assertStats(t, c, "", map[string]int64{"pending": 1, "failed": 2})

	assertOneLineError(t, c.run(t, "retry", a, "x1"), 2, `"x1" is not a job id`)
	assertStats(t, c, "", map[string]int64{"pending": 1, "failed": 2})

	r := c.run(t, "retry", a, p, "999999", b)
	if want := "job " + a + " is pending again\njob " + b + " is pending again\n"; r.code != 1 || r.stdout != want {
		t.Errorf("retry of failed, pending, missing and failed: exit %d, stdout %q; want 1, %q", r.code, r.stdout, want)
	}
	for _, w := range []string{"job " + p + " is pending", "only failed or expired", "no job 999999", "2 of 4 job(s) not retried"} {
		if !strings.Contains(r.stderr, w) {
			t.Errorf("stderr %q does not say %q", r.stderr, w)
		}
	}
	assertStats(t, c, "", map[string]int64{"pending": 3})
}

// TestControlNegativeID: a negative id given to cancel, delete or retry is
// refused as every bad id is, a usage error that names it and says what an
// id is, with nothing changed (the valid ids beside it included), not as
// an unknown flag ("unknown shorthand flag: '5' in -5"), which cobra made
// of it.
func TestControlNegativeID(t *testing.T) {
	t.Parallel()
	c := cli{db: "sqlite:" + filepath.Join(t.TempDir(), "c.db")}
	c.ok(t, "install")
	id := strings.TrimSpace(c.ok(t, "enqueue", "--name", "a"))
	cases := []struct {
		args []string
		bad  string
	}{
		{[]string{"cancel", "-5"}, "-5"},
		{[]string{"cancel", id, "-12"}, "-12"},
		{[]string{"delete", "-1", id}, "-1"},
		{[]string{"retry", "-7"}, "-7"},
	}
	for _, tc := range cases {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			r := c.run(t, tc.args...)
			assertOneLineError(t, r, 2, `"`+tc.bad+`" is not a job id; ids are positive integers`)
			if r.stdout != "" {
				t.Errorf("stdout %q, want nothing", r.stdout)
			}
			assertStats(t, c, "", map[string]int64{"pending": 1})
		})
	}
}

// TestEnqueueBadUniqueKeyBeforeConnecting: a bad --unique-key is a usage
// error (exit 2) that names the flag, found before the database is opened:
// with a database that cannot be opened it was reported as that failure
// (exit 1), and the key's mistake only once the database answered.
func TestEnqueueBadUniqueKeyBeforeConnecting(t *testing.T) {
	t.Parallel()
	c := cli{db: "sqlite:" + filepath.Join(t.TempDir(), "missing-dir", "c.db")}
	cases := []struct {
		name, key, want string
	}{
		{"empty", "", "--unique-key is empty"},
		{"trailing space", "k ", "ends with a space"},
		{"too long", strings.Repeat("é", 256), "has 256 characters; at most 255"},
		{"not UTF-8", "k\xff", "not valid UTF-8"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := c.run(t, "enqueue", "--name", "a", "--unique-key", tc.key)
			assertOneLineError(t, r, 2, "--unique-key", tc.want)
		})
	}
}
