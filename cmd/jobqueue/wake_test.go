//go:build unix

package main

import (
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestWorkWakeUp checks how an idle `jobqueue work` finds a job that
// another process enqueues: on PostgreSQL at once through LISTEN/NOTIFY,
// even with an hour between polls (which also proves `jobqueue enqueue`
// sends its notification before it exits); with --poll-only, on every
// engine, by polling at --poll-interval.
func TestWorkWakeUp(t *testing.T) {
	t.Parallel()
	type wakeCase struct {
		name   string
		engine string
		args   []string
	}
	var cases []wakeCase
	for _, k := range kinds() {
		cases = append(cases, wakeCase{k + "/poll-only", k, []string{"--poll-only", "--poll-interval", "300ms"}})
	}
	cases = append(cases, wakeCase{"postgres/listen", "postgres", []string{"--poll-interval", "1h"}})
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := engineCLI(t, tc.engine)
			c.ok(t, "install")
			ran := filepath.Join(t.TempDir(), "ran")
			args := append(append([]string{}, tc.args...), "--log-level", "debug", "--exec", "cat > "+ran+".tmp && mv "+ran+".tmp "+ran)
			_, stderr := startWorker(t, c, args...)
			// Wait until the worker has made its first (empty) claim and
			// is idle, so that only a wake-up or a poll can start the job.
			for deadline := time.Now().Add(20 * time.Second); !strings.Contains(stderr.String(), "worker started"); time.Sleep(20 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("worker did not start; stderr:\n%s", stderr)
				}
			}
			time.Sleep(500 * time.Millisecond)
			c.ok(t, "enqueue", "--name", "wake", "--payload", `{"n":1}`)
			if got := waitFile(t, ran, 10*time.Second); !strings.Contains(got, `"n"`) {
				t.Errorf("the command read %q on stdin, want the payload", got)
			}
		})
	}
}
