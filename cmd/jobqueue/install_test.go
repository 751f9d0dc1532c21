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
	for _, k := range testdb.Kinds {
		t.Run(string(k), func(t *testing.T) {
			t.Parallel()
			url := testdb.URL(t, k)
			db := testdb.OpenURL(t, url)
			table := testdb.Table(t, db)
			mixed := strings.ToUpper(table[:1]) + table[1:] // T_… : the same table on PostgreSQL
			c := cli{db: url, table: mixed}
			wantName := mixed
			if k == engine.Postgres {
				wantName = table
			} else {
				t.Cleanup(func() {
					tbl, _ := engine.ParseTable(k, mixed)
					db.ExecContext(context.Background(), "DROP TABLE IF EXISTS "+tbl.Quoted())
				})
			}
			for run := 1; run <= 2; run++ {
				out := c.ok(t, "install")
				if want := fmt.Sprintf("table %s is installed (%s)\n", wantName, k); out != want {
					t.Errorf("run %d printed %q, want %q", run, out, want)
				}
			}
			tbl, _ := engine.ParseTable(k, mixed)
			var n int
			if err := db.QueryRowContext(context.Background(), "SELECT COUNT(*) FROM "+tbl.Quoted()).Scan(&n); err != nil || n != 0 {
				t.Errorf("the installed table cannot be read or is not empty: %d, %v", n, err)
			}
		})
	}
}
