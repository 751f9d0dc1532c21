package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestMissingJobOneError: every command given a job id that is not in the
// table fails with exit 1 and the same one line, the queue's
// ErrJobNotFound error. retry said "no job N in table T; 'jobqueue list
// --status failed' shows …" and show another hint, while cancel and delete
// said "job not found: no job N in table "T"".
func TestMissingJobOneError(t *testing.T) {
	t.Parallel()
	c := cli{db: "sqlite:" + filepath.Join(t.TempDir(), "c.db")}
	c.ok(t, "install")
	const want = `job not found: no job 999999 in table "jobs" (never enqueued there, or deleted or pruned since); check the id and the table`
	for _, op := range []string{"retry", "cancel", "delete", "show"} {
		t.Run(op, func(t *testing.T) {
			r := c.run(t, op, "999999")
			assertOneLineError(t, r, exitFailure, want)
			if got := strings.TrimSpace(strings.TrimPrefix(r.stderr, "jobqueue: ")); got != want {
				t.Errorf("%s 999999 said %q; want exactly %q", op, got, want)
			}
		})
	}
}
