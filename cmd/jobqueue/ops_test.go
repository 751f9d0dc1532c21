package main

import (
	"context"
	"testing"
	"time"

	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/testdb"
)

// TestCountLines: expire and prune print how many jobs they changed, in
// words that agree with the number ("expired 1 job", not "1 jobs").
func TestCountLines(t *testing.T) {
	t.Parallel()
	e := testdb.New(t, engine.SQLite)
	c := envCLI(t, e)
	c.ok(t, "install")
	tbl := parseTable(t, e.Kind, c.table)
	past := e.Kind.TimeArg(time.Now().Add(-time.Hour))
	cases := []struct {
		name string
		jobs int    // jobs enqueued, each with a deadline an hour ahead
		set  string // then set on each of them, with past as its ?
		args []string
		want string
	}{
		{"expire none", 0, "", []string{"expire"}, "expired 0 jobs\n"},
		{"expire one", 1, "expires_at = ?", []string{"expire"}, "expired 1 job\n"},
		{"expire two", 2, "expires_at = ?", []string{"expire"}, "expired 2 jobs\n"},
		{"prune one", 1, "status = 'completed', finished_at = ?", []string{"prune", "--older-than", "1m"}, "pruned 1 job\n"},
		{"prune two", 2, "status = 'failed', finished_at = ?", []string{"prune", "--older-than", "1m"}, "pruned 2 jobs\n"},
	}
	for _, tc := range cases {
		if _, err := e.DB.ExecContext(context.Background(), "DELETE FROM "+tbl.Quoted()); err != nil {
			t.Fatal(err)
		}
		for range tc.jobs {
			c.ok(t, "enqueue", "--name", "k", "--expires-in", "1h")
		}
		if tc.set != "" {
			updateJobs(t, e, tbl, tc.set, past)
		}
		if out := c.ok(t, tc.args...); out != tc.want {
			t.Errorf("%s: printed %q, want %q", tc.name, out, tc.want)
		}
	}
}
