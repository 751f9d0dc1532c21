//go:build unix

package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/testdb"
	"github.com/jobqueue/jobqueue/internal/testwait"
)

// TestWorkWakeUp checks how an idle `jobqueue work` finds a job that
// another process enqueues: on PostgreSQL at once through LISTEN/NOTIFY,
// even with an hour between polls (which also proves `jobqueue enqueue`
// sends its notification before it exits); on MySQL at once too, the
// enqueue interrupting the worker's wait before it exits; on SQLite, by
// watching the database's data version; with --poll-only, on every
// engine, by polling at --poll-interval, and so with --transaction-pooling,
// whose worker says in its log that it polls because of the pooler.
func TestWorkWakeUp(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		only  engine.Kind // "" for every engine
		ready string      // the worker's log line to wait for before enqueueing
		args  []string
	}{
		{"poll-only", "", "", []string{"--poll-only", "--poll-interval", "300ms"}},
		{"transaction-pooling", "", "the queue runs through a transaction pooler", []string{"--transaction-pooling", "--poll-interval", "300ms"}},
		{"listen", engine.Postgres, "listening for enqueues", []string{"--poll-interval", "1h"}},
		{"wait", engine.MySQL, "waiting for the enqueues of other processes", []string{"--poll-interval", "1h"}},
		{"watch", engine.SQLite, "started watching for the commits of other processes", []string{"--poll-interval", "1h"}},
	}
	testdb.ForEachEngine(t, func(t *testing.T, e *testdb.Env) {
		for _, tc := range cases {
			if tc.only != "" && tc.only != e.Kind {
				continue
			}
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				c := envCLI(t, e)
				c.ok(t, "install")
				// A first job, there before the worker starts: once it
				// has run, the worker's first claim is over and found
				// fewer jobs than it had room for, so the worker is idle
				// until a poll or a wake-up (a later job cannot ride on
				// the first claim).
				first := strings.TrimSpace(c.ok(t, "enqueue", "--name", "wake", "--payload", `{"n":0}`))
				dir := t.TempDir()
				args := append(append([]string{}, tc.args...), "--log-level", "debug", "--exec",
					`cat > `+dir+`/$JOB_ID.tmp && mv `+dir+`/$JOB_ID.tmp `+dir+`/$JOB_ID`)
				_, stderr := startWorker(t, c, args...)
				if n := payloadN(t, waitFile(t, filepath.Join(dir, first), 20*time.Second)); n != 0 {
					t.Fatalf("the first command read n=%d on stdin, want 0", n)
				}
				if tc.ready != "" {
					// The worker claims once more right after LISTEN
					// succeeds, or the watch has begun (jobs enqueued
					// before were not heard); that claim starts within a
					// moment of this line, long before the enqueue
					// below, a new process, has connected.
					waitStderr(t, stderr, tc.ready, 20*time.Second)
				}
				second := strings.TrimSpace(c.ok(t, "enqueue", "--name", "wake", "--payload", `{"n":1}`))
				if n := payloadN(t, waitFile(t, filepath.Join(dir, second), 30*time.Second)); n != 1 {
					t.Errorf("the second command read n=%d on stdin, want 1", n)
				}
			})
		}
	})
}

// waitStderr waits until a worker's stderr contains want.
func waitStderr(t *testing.T, stderr *syncBuffer, want string, within time.Duration) {
	t.Helper()
	testwait.Until(t, within, 20*time.Millisecond, func() bool { return strings.Contains(stderr.String(), want) }, func() string {
		return fmt.Sprintf("the worker did not log %q within %v; stderr:\n%s", want, within, stderr)
	})
}

// payloadN decodes a {"n": N} payload a command read on stdin.
func payloadN(t *testing.T, stdin string) int {
	t.Helper()
	var p struct{ N *int }
	decodeJSON(t, stdin, &p)
	if p.N == nil {
		t.Fatalf("the command read %q on stdin, want a payload with n", stdin)
	}
	return *p.N
}
