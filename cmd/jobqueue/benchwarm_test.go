package main

import (
	"context"
	"database/sql"
	"strings"
	"testing"

	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/testdb"
	"github.com/jobqueue/jobqueue/migrations"
)

// TestWarmPool: before bench's drain starts, a worker's pool holds
// workerConns open connections, idle, each of which has read the table
// (SQLite's pool is left alone); a table that is not there is an error
// that names it.
func TestWarmPool(t *testing.T) {
	t.Parallel()
	testdb.ForEachEngine(t, func(t *testing.T, e *testdb.Env) {
		ctx := context.Background()
		db := testdb.OpenURL(t, e.URL) // a pool of its own: its count is the test's
		name := e.Table(t)
		if err := migrations.Install(ctx, db, name); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { migrations.Uninstall(context.Background(), e.DB, name) })
		if err := warmPool(ctx, db, e.Kind, name); err != nil {
			t.Fatal(err)
		}
		st := db.Stats()
		want := workerConns
		if e.Kind == engine.SQLite {
			want = st.OpenConnections // untouched
		}
		if st.Idle != want || st.InUse != 0 {
			t.Errorf("after warmPool: %d idle, %d in use, want %d idle and none in use", st.Idle, st.InUse, want)
		}
		if e.Kind != engine.SQLite {
			err := warmPool(ctx, db, e.Kind, name+"_missing")
			if err == nil {
				t.Fatal("warmPool on a missing table returned nil")
			}
			if !strings.Contains(err.Error(), name+"_missing") {
				t.Errorf("error does not name the table: %v", err)
			}
		}
	})
}

// TestOpenKeepsWorkerConnsIdle: the pool of every command (app.open) keeps
// workerConns connections idle once they were in use at once, instead of
// database/sql's default of 2 (a worker then closed and reopened
// connections all through a busy spell).
func TestOpenKeepsWorkerConnsIdle(t *testing.T) {
	t.Parallel()
	testdb.ForEachEngine(t, func(t *testing.T, e *testdb.Env) {
		ctx := context.Background()
		a := &app{dbURL: e.URL, table: e.Table(t)}
		db, _, _, err := a.open(ctx)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		want := workerConns
		if m := db.Stats().MaxOpenConnections; m > 0 && m < want {
			want = m // SetMaxIdleConns never keeps more than the pool may open
		}
		conns := make([]*sql.Conn, 0, want)
		for range want {
			c, err := db.Conn(ctx)
			if err != nil {
				t.Fatal(err)
			}
			conns = append(conns, c)
		}
		for _, c := range conns {
			if err := c.Close(); err != nil {
				t.Fatal(err)
			}
		}
		if st := db.Stats(); st.Idle != want || st.MaxIdleClosed != 0 {
			t.Errorf("after %d connections in use at once: %d idle, %d closed for the idle limit; want %d idle, none closed", want, st.Idle, st.MaxIdleClosed, want)
		}
	})
}
