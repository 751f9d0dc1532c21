package main

import (
	"context"
	"strings"
	"testing"

	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/testdb"
	"github.com/jobqueue/jobqueue/migrations"
)

// TestWarmPool: before bench's drain starts, a worker's pool holds
// benchWarmConns open connections, idle, each of which has read the table
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
		want := benchWarmConns
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
