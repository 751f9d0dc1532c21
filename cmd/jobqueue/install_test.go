package main

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/testdb"
)

// TestInstall checks `install` on every engine: it creates the table, a
// second run changes nothing, and the table name folds to lower case on
// PostgreSQL only.
func TestInstall(t *testing.T) {
	t.Parallel()
	testdb.ForEachEngine(t, func(t *testing.T, e *testdb.Env) {
		k, url, db := e.Kind, e.URL, e.DB
		table := e.Table(t)
		mixed := strings.ToUpper(table[:1]) + table[1:] // T_… : the same table on PostgreSQL
		c := cli{db: url, table: mixed}
		wantName := mixed
		if k == engine.Postgres {
			wantName = table
		} else {
			// Another table than e.Table's here: drop it and its side tables.
			t.Cleanup(func() { testdb.Drop(t, db, mixed) })
		}
		for run := 1; run <= 2; run++ {
			out := c.ok(t, "install")
			if want := fmt.Sprintf("table %s is installed (%s)\n", wantName, k); out != want {
				t.Errorf("run %d printed %q, want %q", run, out, want)
			}
		}
		tbl := parseTable(t, k, mixed)
		var n int
		if err := db.QueryRowContext(context.Background(), "SELECT COUNT(*) FROM "+tbl.Quoted()).Scan(&n); err != nil || n != 0 {
			t.Errorf("the installed table cannot be read or is not empty: %d, %v", n, err)
		}
	})
}
