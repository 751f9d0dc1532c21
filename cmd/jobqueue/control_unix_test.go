//go:build unix

package main

import (
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jobqueue/jobqueue/internal/testdb"
)

// TestCancelRunningExec checks on every engine that cancelling a job whose
// `work --exec` command runs kills the command with everything it started
// (within a heartbeat; at once on PostgreSQL, through NOTIFY), leaves the
// job failed with the error "cancelled" for good, and that the worker goes
// on with other jobs.
func TestCancelRunningExec(t *testing.T) {
	t.Parallel()
	testdb.ForEachEngine(t, func(t *testing.T, e *testdb.Env) {
		c := envCLI(t, e)
		c.ok(t, "install")
		id := strings.TrimSpace(c.ok(t, "enqueue", "--name", "long"))
		dir := t.TempDir()
		pidFile, next := filepath.Join(dir, "child.pid"), filepath.Join(dir, "next")
		// The long job starts a child and waits; any other job writes
		// the file next.
		cmd, stderr := startWorker(t, c, "--lease", "3s", "--grace", "1s", "--exec",
			`if [ "$JOB_NAME" = long ]; then sleep 60 & echo $! > `+pidFile+`; wait; exit 0; fi; echo $JOB_ID > `+next)
		child, err := strconv.Atoi(strings.TrimSpace(waitFile(t, pidFile, 20*time.Second)))
		if err != nil {
			t.Fatal(err)
		}
		if out := c.ok(t, "cancel", id); !strings.Contains(out, "cancelled") {
			t.Errorf("cancel printed %q", out)
		}
		waitGone(t, child, 15*time.Second, "was not killed after its job was cancelled", stderr)
		// The worker goes on with other jobs.
		other := strings.TrimSpace(c.ok(t, "enqueue", "--name", "other"))
		if got := strings.TrimSpace(waitFile(t, next, 20*time.Second)); got != other {
			t.Errorf("the next job run was %q, want %s", got, other)
		}
		if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatalf("stopping the worker: %v", err)
		}
		if code := waitExit(t, cmd, 15*time.Second); code != 0 {
			t.Fatalf("exit %d after SIGTERM; stderr:\n%s", code, stderr)
		}
		var job map[string]any
		decodeJSON(t, c.ok(t, "show", id, "--json"), &job)
		if job["status"] != "failed" || job["error"] != "cancelled" || job["claim_token"] != nil {
			t.Errorf("the cancelled job after its command was killed: %v", job)
		}
		assertStats(t, c, "", map[string]int64{"failed": 1, "completed": 1})
	})
}
