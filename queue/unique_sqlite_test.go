package queue

import (
	"context"
	"testing"

	"github.com/jobqueue/jobqueue/internal/ddl"
	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/migrations"
)

// TestKeyedViewSQLite: on SQLite a keyed enqueue of a free key is one
// statement, an insert into the view <table>_keyed, that writes the job and
// its key row (and returns the job's id); a held key writes nothing through
// it and ends as a duplicate; a table installed before the view keeps
// working through the transaction, and uses the view again once Install
// added it.
func TestKeyedViewSQLite(t *testing.T) {
	ctx := context.Background()
	env := coreEnv(t, engine.SQLite)
	var sc stmtCounter
	q, clock := coreQueue(t, env, withStatementHook(sc.observe))
	keyRow := func(t *testing.T, key string) (jobID int64) {
		t.Helper()
		side := ddl.Side(env.tbl, "unique")
		if err := env.db.QueryRowContext(ctx, "SELECT job_id FROM "+side.Quoted()+" WHERE live_key = ?", key).Scan(&jobID); err != nil {
			t.Fatalf("the key row of %q: %v", key, err)
		}
		return jobID
	}
	viewStatements := func() int { return sc.countWith(ddl.Side(env.tbl, "keyed").Name) }

	t.Run("one statement", func(t *testing.T) {
		newKeyed(t, q, "first")           // the first keyed enqueue checks the side table
		mustEnqueue(t, q, testArgs{N: 1}) // another id before, so a wrong id shows
		sc.reset()
		id := newKeyed(t, q, "a", UniqueFor(0))
		if n, v := sc.count(), viewStatements(); n != 1 || v != 1 {
			t.Fatalf("a keyed enqueue sent %d statements, %d into the view; want 1 into the view: %q", n, v, sc.texts)
		}
		if got := keyRow(t, "a"); got != id {
			t.Fatalf("Enqueue returned %d; the key row holds job %d", id, got)
		}
		if j := getJob(t, q, id); j.Status != StatusPending || j.Name != "test" {
			t.Fatalf("job %d is %s %s; want a pending test job", id, j.Status, j.Name)
		}
	})
	t.Run("held key writes nothing", func(t *testing.T) {
		id := keyRow(t, "a")
		before := rowCount(t, env)
		sc.reset()
		wantDup(t, q, "a", id)
		if v := viewStatements(); v != 1 {
			t.Fatalf("%d statements into the view; want the one that failed", v)
		}
		if n := rowCount(t, env); n != before {
			t.Fatalf("%d jobs after a duplicate; want %d", n, before)
		}
	})
	t.Run("table without the view", func(t *testing.T) {
		env.exec(t, "DROP VIEW "+ddl.Side(env.tbl, "keyed").Quoted())
		sc.reset()
		b := newKeyed(t, q, "b")
		wantDup(t, q, "b", b)
		c := newKeyed(t, q, "c")
		if got := keyRow(t, "b"); got != b {
			t.Fatalf("key b held by %d; want %d", got, b)
		}
		if got := keyRow(t, "c"); got != c {
			t.Fatalf("key c held by %d; want %d", got, c)
		}
		if v := viewStatements(); v != 1 {
			t.Fatalf("%d tries of the missing view; want 1 (then none until keyedViewRecheck)", v)
		}
		if err := migrations.Install(ctx, env.db, env.table); err != nil {
			t.Fatal(err)
		}
		clock.add(keyedViewRecheck)
		sc.reset()
		d := newKeyed(t, q, "d")
		if n, v := sc.count(), viewStatements(); n != 1 || v != 1 {
			t.Fatalf("after Install: %d statements, %d into the view; want 1 into the view", n, v)
		}
		if got := keyRow(t, "d"); got != d {
			t.Fatalf("key d held by %d; want %d", got, d)
		}
	})
}
