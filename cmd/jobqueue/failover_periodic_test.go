//go:build unix

package main

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/testdb"
	"github.com/jobqueue/jobqueue/internal/testwait"
	"github.com/jobqueue/jobqueue/queue"
)

// TestPostgresFailoverPeriodic: two `work --periodic 'tick=@every 1s'`
// processes on the multi-host URL of a primary and its asynchronous
// standby. The primary goes down as in a crash and the standby is
// promoted: a worker leads on the new primary with no manual step (the
// old leader's row came over with the standby, lagging or not), the ticks
// go on there, and the new primary holds no tick twice (a tick whose job
// was lost with the old primary lost its record with it: enqueued again,
// it is one job). SPEC sections 9 and 12; TestPostgresFailover drains jobs
// across a failover but runs no periodic job.
func TestPostgresFailoverPeriodic(t *testing.T) {
	t.Parallel()
	pair := testdb.PostgresPair(t, false)
	c := cli{db: pair.URL(), table: testdb.Table(t, nil), timeout: time.Minute}
	c.ok(t, "install")
	procs := startProcs(t, c, 2)
	db, _, err := engine.Open(context.Background(), pair.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	q, err := queue.New(db, queue.WithTable(c.table), queue.WithLogger(testdb.QuietLogger()))
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	waitLeader(t, procs, 30*time.Second)
	waitTicks(t, q, time.Time{}, 3, time.Minute)

	if err := pair.Primary.Stop(syscall.SIGQUIT); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := pair.Promote(ctx); err != nil {
		t.Fatal(err)
	}
	promoted := time.Now().UTC()
	// The pool's connections to the old primary fail: read until the new
	// primary answers, then wait for its ticks.
	var listErr error
	testwait.Until(t, time.Minute, 100*time.Millisecond, func() bool {
		_, listErr = q.List(context.Background(), queue.ListFilter{Limit: 1})
		return listErr == nil
	}, func() string { return fmt.Sprintf("the new primary did not answer within a minute: %v", listErr) })
	waitTicks(t, q, promoted, 3, 2*time.Minute)
	for i, p := range procs {
		if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatalf("worker %d is gone: %v; its log:\n%s", i, err, p.tail(40))
		}
		if code := waitExit(t, p.cmd, 30*time.Second); code != 0 {
			t.Errorf("worker %d: exit %d; its log:\n%s", i, code, p.tail(40))
		}
	}
	ticks(t, q) // none twice on the new primary
}
