//go:build unix

package main

import (
	"context"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/testdb"
)

// TestInterruptedCommandSaysSo: a one-shot command stopped by SIGINT while
// it waits for the database (here an enqueue, behind a lock the test holds)
// fails (exit 1) with one line that says a signal stopped it and what to
// do, not only the bare "context canceled" of the statement it was in; and
// the enqueue it was in wrote nothing.
func TestInterruptedCommandSaysSo(t *testing.T) {
	t.Parallel()
	e := testdb.New(t, engine.Postgres)
	c := envCLI(t, e)
	c.ok(t, "install")
	tbl := parseTable(t, e.Kind, c.table)
	ctx := context.Background()
	tx, err := e.DB.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, "LOCK TABLE "+tbl.Quoted()+" IN ACCESS EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(binary, "--db", c.db, "--table", c.table, "enqueue", "--name", "k")
	stderr := startCmd(t, cmd)
	// The command waits for the lock: its signal handling is set up.
	eventually(t, time.Minute, "the enqueue to wait for the table's lock", func() bool {
		var waiting int
		if err := e.DB.QueryRowContext(ctx, "SELECT count(*) FROM pg_locks l JOIN pg_class c ON c.oid = l.relation WHERE c.relname = $1 AND NOT l.granted", tbl.Name).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		return waiting > 0
	})
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	code := waitExit(t, cmd, time.Minute)
	assertOneLineError(t, result{code: code, stderr: stderr.String()}, exitFailure, "stopped by a signal before it finished", "context canceled", "check with 'jobqueue list'")
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	assertStats(t, c, "", map[string]int64{})
}
