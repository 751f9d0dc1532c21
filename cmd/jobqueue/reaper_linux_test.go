//go:build linux

package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jobqueue/jobqueue/internal/testwait"
)

// TestWorkPID1ReapsOrphans runs a worker as PID 1 of a new PID namespace
// (unshare -fp --mount-proc, as in a container without an init) with
// commands that leave orphans behind, some ending at once, some after their
// command: once the jobs are done, none of them is left a zombie (the worker
// reaped them), and each job's outcome is still its command's exit status
// (the reaper took no status the worker waited for: that would fail a
// command that exited 0 with "no child processes").
func TestWorkPID1ReapsOrphans(t *testing.T) {
	t.Parallel()
	unshare := needUnshare(t)
	c := sqliteCLI(t)
	c.ok(t, "install")
	const good, bad = 16, 4
	for i := range good + bad {
		args := []string{"enqueue", "--name", "good"}
		if i%5 == 4 {
			args = []string{"enqueue", "--name", "bad", "--max-attempts", "1", "--base-delay", "1", "--max-delay", "1"}
		}
		c.ok(t, args...)
	}
	// Orphans: one that ends at once, two that outlive the command (the
	// sleeps are their lifetimes, not a synchronisation).
	script := `(true &); (sleep 0.2 >/dev/null 2>&1 &); (sleep 0.5 &); test "$JOB_NAME" = good || { echo "bad job $JOB_ID" >&2; exit 3; }`
	cmd := exec.Command(unshare, "-fp", "--mount-proc", binary, "--db", c.db, "--table", c.table,
		"work", "--concurrency", "4", "--poll-interval", "50ms", "--exec", script)
	stderr := startCmd(t, cmd)

	var worker int
	eventually(t, 30*time.Second, "the worker to start under unshare", func() bool {
		for pid := range procChildren(t, cmd.Process.Pid) {
			worker = pid
		}
		return worker != 0
	})
	var stats string
	testwait.Until(t, 60*time.Second, 50*time.Millisecond, func() bool {
		r := c.run(t, "stats", "--json")
		var got map[string]int64
		if err := json.Unmarshal([]byte(r.stdout), &got); err != nil {
			t.Fatalf("stats --json: exit %d, %v; stdout %q, stderr %q", r.code, err, r.stdout, r.stderr)
		}
		stats = r.stdout
		return got["completed"]+got["failed"] == good+bad
	}, func() string {
		return fmt.Sprintf("the jobs were not done within 60s (a good job whose exit status was lost fails and is retried): stats %s; worker's stderr:\n%s", stats, stderr)
	})
	assertStats(t, c, "", map[string]int64{"completed": good, "failed": bad})
	var failed []map[string]any
	decodeJSON(t, c.ok(t, "list", "--status", "failed", "--json"), &failed)
	for _, j := range failed {
		id := int64(j["id"].(float64))
		if errText, _ := j["error"].(string); j["name"] != "bad" || !strings.Contains(errText, "exit status 3") || !strings.HasSuffix(errText, fmt.Sprintf("bad job %d", id)) {
			t.Errorf("failed job %d (%v): error %q, want a bad job's exit status 3 and its stderr", id, j["name"], errText)
		}
	}

	// The orphans end within 0.5 s of their command; the worker must then
	// have no child left, zombie or not.
	var left map[int]string
	testwait.Until(t, 30*time.Second, 50*time.Millisecond, func() bool {
		left = procChildren(t, worker)
		return len(left) == 0
	}, func() string {
		return fmt.Sprintf("the worker (PID 1) still has children (pid: state and name) %v; stderr:\n%s", left, stderr)
	})

	if err := syscall.Kill(worker, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := waitExit(t, cmd, 30*time.Second); code != 0 {
		t.Fatalf("worker exit %d after SIGTERM, want 0; stderr:\n%s", code, stderr)
	}
	if s := stderr.String(); strings.Contains(s, "WARN") {
		t.Errorf("the worker warned:\n%s", s)
	}
}

// needUnshare skips the test unless it can run the worker as PID 1 of a
// new PID namespace, and returns the path of unshare.
func needUnshare(t *testing.T) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root, to run the worker as PID 1 of a new PID namespace (unshare -fp); run the tests as root")
	}
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		t.Skip("needs unshare (util-linux), to run the worker as PID 1 of a new PID namespace: ", err)
	}
	return unshare
}

// TestWorkPID1ForeignProc: a worker that is PID 1 of a PID namespace whose
// /proc is another's (unshare -fp without --mount-proc) cannot tell its
// zombie children: it warns that it does not reap them and how to fix that,
// and runs its jobs all the same.
func TestWorkPID1ForeignProc(t *testing.T) {
	t.Parallel()
	unshare := needUnshare(t)
	c := sqliteCLI(t)
	c.ok(t, "install")
	c.ok(t, "enqueue", "--name", "good")
	cmd := exec.Command(unshare, "-fp", binary, "--db", c.db, "--table", c.table,
		"work", "--max-jobs", "1", "--poll-interval", "50ms", "--exec", "true")
	stderr := startCmd(t, cmd)
	if code := waitExit(t, cmd, 60*time.Second); code != 0 {
		t.Fatalf("worker exit %d, want 0; stderr:\n%s", code, stderr)
	}
	assertStats(t, c, "", map[string]int64{"completed": 1})
	for _, want := range []string{"level=WARN", "running as PID 1", "not reaped", "--mount-proc", "docker run --init"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("the worker's stderr lacks %q:\n%s", want, stderr)
		}
	}
}

// procChildren lists the processes whose parent is ppid, from /proc: their
// state and name ("Z sleep") by pid.
func procChildren(t *testing.T, ppid int) map[int]string {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	children := map[int]string{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue // ended meanwhile
		}
		s := string(b)
		open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 0 || end < open {
			t.Fatalf("/proc/%d/stat: %q", pid, s)
		}
		f := strings.Fields(s[end+1:])
		if len(f) >= 2 && f[1] == strconv.Itoa(ppid) {
			children[pid] = f[0] + " " + s[open+1:end]
		}
	}
	return children
}

// TestZombieOfInit checks the reading of /proc/<pid>/stat by the reaper.
func TestZombieOfInit(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		stat string
		want bool
	}{
		{"42 (sleep) Z 1 42 1 0 -1", true},
		{"42 (a) b) Z 1 42 1 0 -1", true}, // a name with ") "
		{"42 (sleep) S 1 42 1 0 -1", false},
		{"42 (sleep) Z 7 42 1 0 -1", false},
		{"42 (sleep) Z 12 42 1 0 -1", false},
		{"42 (sleep", false},
		{"", false},
	} {
		if got := zombieOfInit(tc.stat); got != tc.want {
			t.Errorf("zombieOfInit(%q) = %v, want %v", tc.stat, got, tc.want)
		}
	}
}
