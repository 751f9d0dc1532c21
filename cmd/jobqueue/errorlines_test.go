package main

import (
	"context"
	"strings"
	"testing"

	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/testdb"
	"github.com/jobqueue/jobqueue/queue"
)

// TestErrorLinesSayPrefixOnce: the error line of a few bad inputs, exactly:
// each prefix once ("jobqueue: ", the step that failed), where an error of
// the queue, which starts with "jobqueue: " itself, wrapped in a step of
// the command's used to show "jobqueue: … jobqueue: …".
func TestErrorLinesSayPrefixOnce(t *testing.T) {
	t.Parallel()
	c := sqliteCLI(t)
	c.ok(t, "install")
	c.ok(t, "--table", "jobqueue_demo", "install")
	ro := c
	ro.db = c.db + "?mode=ro" // SQLite refuses every write
	cases := []struct {
		name string
		c    cli
		args []string
		code int
		want string // the whole line on stderr
	}{
		{"demo's purge refused", ro, []string{"--table", "jobqueue_demo", "demo"}, exitFailure,
			"jobqueue: empty the demo table jobqueue_demo: purge: attempt to write a readonly database (8)"},
		{"enqueue refused", ro, []string{"enqueue", "--name", "k"}, exitFailure,
			"jobqueue: enqueue k: attempt to write a readonly database (8)"},
		{"no such table", c, []string{"--table", "nope", "stats"}, exitFailure,
			"jobqueue: table missing: there is no table nope in this database; create it with 'jobqueue install --table nope' (or pick the right one with --db and --table)"},
		{"usage", c, []string{"work", "--exec", "true", "--run-missed"}, exitUsage,
			"jobqueue: --run-missed needs --periodic: it enqueues the missed tick of the periodic jobs, and none is given; see 'jobqueue work --help'"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := tc.c.run(t, tc.args...)
			assertOneLineError(t, r, tc.code)
			if got := strings.TrimSuffix(r.stderr, "\n"); got != tc.want {
				t.Errorf("stderr\n  %s\nwant\n  %s", got, tc.want)
			}
		})
	}
}

// TestBenchEnqueueErrorOnce: bench's enqueue errors are the queue's, which
// say "enqueue" already, not wrapped in another "enqueue: ".
func TestBenchEnqueueErrorOnce(t *testing.T) {
	t.Parallel()
	e := testdb.New(t, engine.SQLite)
	table := e.Table(t)
	cli{db: e.URL, table: table}.ok(t, "install")
	ctx := context.Background()
	db, _, err := engine.Open(ctx, e.URL+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := db.Close(); err != nil {
			t.Error(err)
		}
	})
	q, err := queue.NewContext(ctx, db, queue.WithTable(table))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := q.Close(); err != nil {
			t.Error(err)
		}
	})
	cases := []struct {
		name      string
		enqueuers int
		want      string
	}{
		{"in batches", 0, "jobqueue: enqueue 3 jobs (none written): attempt to write a readonly database (8)"},
		{"one by one", 2, "jobqueue: enqueue bench_noop: attempt to write a readonly database (8)"},
	}
	for _, tc := range cases {
		err := enqueueBench(ctx, q, 3, tc.enqueuers)
		if err == nil {
			t.Fatalf("%s: enqueued into a read-only database", tc.name)
		}
		if got := oneLine(err, exitFailure, nil); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
}
