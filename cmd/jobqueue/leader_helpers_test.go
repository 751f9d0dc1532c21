//go:build unix

package main

// Helpers of the leadership tests (leader_test.go): worker processes, the
// leader among them, the periodic job's ticks, a queue of the test's own.

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/jobqueue/jobqueue/internal/testdb"
	"github.com/jobqueue/jobqueue/queue"
)

// proc is one worker process.
type proc struct {
	cmd    *exec.Cmd
	stderr *syncBuffer
}

// logLines returns the process's log lines from byte offset from on whose
// message starts with msg.
func (p *proc) logLines(from int, msg string) []string {
	s := p.stderr.String()
	if from > len(s) {
		from = len(s)
	}
	var out []string
	for _, line := range strings.Split(s[from:], "\n") {
		if strings.Contains(line, `msg="`+msg) {
			out = append(out, line)
		}
	}
	return out
}

// tail is the last n lines the process logged, for a failure's message.
func (p *proc) tail(n int) string {
	lines := strings.Split(strings.TrimRight(p.stderr.String(), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// leads is whether the process's last leadership line is a gain.
func (p *proc) leads() bool {
	s := p.stderr.String()
	gained := strings.LastIndex(s, `msg="leadership gained`)
	lost := max(strings.LastIndex(s, `msg="leadership lost`), strings.LastIndex(s, `msg="leadership given up`))
	return gained > lost
}

// startProcs starts n workers of c's table.
func startProcs(t *testing.T, c cli, n int) []*proc {
	t.Helper()
	procs := make([]*proc, n)
	for i := range procs {
		cmd, stderr := startWorker(t, c, "--type", "tick", "--exec", "true", "--poll-interval", "200ms",
			"--periodic", "tick=@every 1s", "--maintenance-interval", "1s",
			"--leader-lease", leaderLease.String(), "--log-level", "debug")
		procs[i] = &proc{cmd: cmd, stderr: stderr}
	}
	return procs
}

// waitLeader waits until exactly one of procs leads and returns it.
func waitLeader(t *testing.T, procs []*proc, within time.Duration) *proc {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		var leaders []*proc
		for _, p := range procs {
			if p.leads() {
				leaders = append(leaders, p)
			}
		}
		if len(leaders) > 1 {
			t.Fatalf("%d processes lead at once", len(leaders))
		}
		if len(leaders) == 1 {
			return leaders[0]
		}
		if time.Now().After(deadline) {
			t.Fatalf("no process leads after %v", within)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// ticks reads the scheduled times of the periodic job's jobs, failing the
// test if one tick has two jobs.
func ticks(t *testing.T, q *queue.Queue) []time.Time {
	t.Helper()
	rows, err := q.List(context.Background(), queue.ListFilter{Type: "tick", Limit: 10000})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[time.Time]int64{}
	var out []time.Time
	for _, r := range rows {
		if other, dup := seen[r.ScheduledAt]; dup {
			t.Fatalf("tick %v enqueued twice: jobs %d and %d", r.ScheduledAt, other, r.ID)
		}
		seen[r.ScheduledAt] = r.ID
		out = append(out, r.ScheduledAt)
	}
	return out
}

// waitTicks waits until at least n ticks after since were enqueued.
func waitTicks(t *testing.T, q *queue.Queue, since time.Time, n int, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		got := 0
		for _, at := range ticks(t, q) {
			if at.After(since) {
				got++
			}
		}
		if got >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d ticks after %v within %v, want %d", got, since, within, n)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// assertConsecutive checks that every second from the first tick to the
// last has its job.
func assertConsecutive(t *testing.T, q *queue.Queue) {
	t.Helper()
	missing, first, last := testdb.MissingSeconds(ticks(t, q))
	for _, at := range missing {
		t.Errorf("no job for tick %v (ticks from %v to %v, one leader all along)", at, first, last)
	}
}

// openQueue opens the env's table as the test's own reader.
func openTestQueue(t *testing.T, e *testdb.Env, table string) *queue.Queue {
	t.Helper()
	q, err := queue.New(e.DB, queue.WithTable(table))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := q.Close(); err != nil {
			t.Errorf("closing the queue: %v", err)
		}
	})
	return q
}

// tail is the log s from a little before offset on, for failure messages.
func tail(s string, offset int) string {
	from := max(0, offset-3000)
	return s[from:offset] + "\n---- resumed ----\n" + s[offset:]
}
