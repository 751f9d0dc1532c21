//go:build unix

package main

import (
	"strings"
	"testing"
	"time"

	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/testdb"
)

// TestPgBouncerLeaderFailover: three `work --periodic 'tick=@every 1s'`
// processes behind a PgBouncer in transaction pooling mode (fewer server
// connections than clients). One leads; kill -9 of it: another leads
// within the documented bound, with nothing of the dead one's session
// kept (the lease is a row, each act's idle bound is set for its own
// transaction), and the ticks go on, none twice, with no prepared
// statement error. TestPgBouncerTransactionPooling runs one periodic
// worker there, never a change of leader (SPEC sections 9 and 12).
func TestPgBouncerLeaderFailover(t *testing.T) {
	t.Parallel()
	pooled := testdb.PgBouncer(t, 4) + "&default_query_exec_mode=exec"
	e := testdb.New(t, engine.Postgres)
	c := cli{db: pooled, table: e.Table(t), timeout: time.Minute}
	c.ok(t, "install")
	q := openTestQueue(t, e, c.table)
	procs := startProcs(t, c, 3)
	first := waitLeader(t, procs, 30*time.Second)
	waitTicks(t, q, time.Time{}, 3, time.Minute)

	if err := first.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	_ = first.cmd.Wait() // "signal: killed", as meant
	var rest []*proc
	for _, p := range procs {
		if p != first {
			rest = append(rest, p)
		}
	}
	waitLeader(t, rest, takeoverBound+30*time.Second)
	took := time.Since(killed)
	t.Logf("a new leader %v after kill -9 behind PgBouncer (documented bound %v)", took.Round(time.Millisecond), takeoverBound)
	if took > takeoverBound+5*time.Second {
		t.Errorf("the new leader took %v after kill -9; the documented bound is %v", took, takeoverBound)
	}
	waitTicks(t, q, time.Now().UTC(), 3, time.Minute)
	ticks(t, q) // none twice
	for i, p := range rest {
		if strings.Contains(p.stderr.String(), "prepared statement") {
			t.Errorf("worker %d met a prepared statement error behind PgBouncer:\n%s", i, p.tail(40))
		}
	}
}
