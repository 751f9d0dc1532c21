//go:build unix

package main

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/testdb"
	"github.com/jobqueue/jobqueue/internal/testwait"
	"github.com/jobqueue/jobqueue/queue"
)

// TestWorkPeriodicJobShape: the job of a tick of `work --periodic
// 'NAME=SCHEDULE'` is of kind NAME, of the worker's first --type (or
// default without one), with payload {} (SPEC section 9); a CRON_TZ
// prefix in SCHEDULE is the schedule's, not part of the name.
func TestWorkPeriodicJobShape(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name     string
		args     []string
		schedule string
		wantType string
	}{
		{"no --type", nil, "@every 1s", queue.DefaultType},
		{"two --type", []string{"--type", "first", "--type", "second"}, "@every 1s", "first"},
		// A tick every minute; --run-missed enqueues the latest at once.
		{"a time zone", []string{"--type", "zoned"}, "CRON_TZ=Asia/Kathmandu * * * * *", "zoned"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			e := testdb.New(t, engine.SQLite)
			cl := envCLI(t, e)
			cl.ok(t, "install")
			q := openTestQueue(t, e, cl.table)
			args := append(append([]string{}, c.args...), "--exec", "true", "--poll-interval", "200ms",
				"--periodic", "beat="+c.schedule, "--run-missed")
			cmd, stderr := startWorker(t, cl, args...)
			var job *queue.JobRow
			testwait.Until(t, 30*time.Second, 50*time.Millisecond, func() bool {
				rows, err := q.List(context.Background(), queue.ListFilter{Limit: 10})
				if err != nil {
					t.Fatal(err)
				}
				if len(rows) > 0 {
					job = rows[0]
				}
				return job != nil
			}, func() string { return "no tick's job within 30 s; the worker's log:\n" + stderr.String() })
			if job.Name != "beat" || job.Type != c.wantType || strings.TrimSpace(string(job.Payload)) != "{}" {
				t.Errorf("the tick's job: kind %q, type %q, payload %s; want kind beat, type %q, payload {}", job.Name, job.Type, job.Payload, c.wantType)
			}
			if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			if code := waitExit(t, cmd, 30*time.Second); code != 0 {
				t.Errorf("the worker exited %d after SIGTERM; its log:\n%s", code, stderr)
			}
		})
	}
}
