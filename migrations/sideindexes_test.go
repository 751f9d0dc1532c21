package migrations

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/jobqueue/jobqueue/internal/ddl"
	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/testdb"
)

// TestInstallRepairsSideIndexes: Install recreates the unique index on
// <table>_unique's live_key (what lets one job hold a key at a time) when
// it was dropped, or replaced by a plain index of its name, or (MySQL)
// hidden from the optimizer; afterwards two rows holding one key are
// refused. On MySQL, where the index is part of the side table's CREATE
// TABLE IF NOT EXISTS, a dropped one stayed missing; on every engine one
// replaced by a plain index stayed so (CREATE INDEX IF NOT EXISTS).
func TestInstallRepairsSideIndexes(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		kind  engine.Kind // "" for every engine
		setup func(side engine.Table, ix string) []string
	}{
		{"dropped", "", func(side engine.Table, ix string) []string { return []string{dropIndexSQL(side, ix)} }},
		{"not unique", "", func(side engine.Table, ix string) []string {
			return []string{dropIndexSQL(side, ix), createIndexOnSQL(side, ix, "live_key")}
		}},
		{"on another column", "", func(side engine.Table, ix string) []string {
			return []string{dropIndexSQL(side, ix), createIndexOnSQL(side, ix, "unique_key")}
		}},
		{"invisible", engine.MySQL, func(side engine.Table, ix string) []string {
			return []string{"ALTER TABLE " + side.Quoted() + " ALTER INDEX `" + ix + "` INVISIBLE"}
		}},
	}
	testdb.ForEachEngine(t, func(t *testing.T, e *testdb.Env) {
		for _, c := range cases {
			if c.kind != "" && c.kind != e.Kind {
				continue
			}
			t.Run(c.name, func(t *testing.T) {
				t.Parallel()
				ctx := context.Background()
				name := e.Table(t)
				tb := tableOf(t, e.Kind, name)
				if err := Install(ctx, e.DB, name); err != nil {
					t.Fatal(err)
				}
				side := ddl.Side(tb, "unique")
				setup := c.setup(side, ddl.IndexName(side, "live_key"))
				if e.Kind == engine.MySQL && isMariaDB(t, e.DB) {
					for i, q := range setup {
						setup[i] = strings.Replace(q, " INVISIBLE", " IGNORED", 1)
					}
				}
				mustExec(t, e.DB, setup...)

				if err := Install(ctx, e.DB, name); err != nil {
					t.Fatalf("Install: %v", err)
				}
				insert := "INSERT INTO " + side.Quoted() + " (job_id, unique_key, live_key, held_until) VALUES (%d, 'k', 'k', '2026-01-01 00:00:00')"
				mustExec(t, e.DB, strings.Replace(insert, "%d", "1", 1))
				if _, err := e.DB.ExecContext(ctx, strings.Replace(insert, "%d", "2", 1)); err == nil {
					t.Errorf("a second row holding key k was accepted: the unique index on live_key is not there")
				}
				if e.Kind == engine.MySQL {
					if hidden := mysqlHiddenIndexNames(t, e, side); len(hidden) != 0 {
						t.Errorf("indexes of %s still invisible (ignored): %v", side.Name, hidden)
					}
				}
				// Install again changes nothing.
				before := takeSnapshot(t, e.DB, side)
				if err := Install(ctx, e.DB, name); err != nil {
					t.Fatalf("Install again: %v", err)
				}
				if diff := cmp.Diff(before, takeSnapshot(t, e.DB, side)); diff != "" {
					t.Errorf("Install again changed %s (-before +after):\n%s", side.Name, diff)
				}
			})
		}
	})
}

// TestInstallRefusesSideIndexNameOfAnotherTable: on PostgreSQL and SQLite,
// where index names are per schema, an index of another table holding the
// name of <table>_unique's unique index makes Install fail, naming that
// table and creating nothing. Install went through, CREATE UNIQUE INDEX
// IF NOT EXISTS doing nothing, and one job per key was not enforced.
func TestInstallRefusesSideIndexNameOfAnotherTable(t *testing.T) {
	t.Parallel()
	testdb.ForEachEngine(t, func(t *testing.T, e *testdb.Env) {
		if e.Kind == engine.MySQL {
			return // index names are per table there
		}
		ctx := context.Background()
		mine := tableOf(t, e.Kind, e.Table(t))
		tb := tableOf(t, e.Kind, e.Table(t))
		side := ddl.Side(tb, "unique")
		mustExec(t, e.DB, "CREATE TABLE "+mine.Quoted()+" (x INT)",
			"CREATE INDEX "+ddl.QuoteIdent(e.Kind, ddl.IndexName(side, "live_key"))+" ON "+mine.Quoted()+" (x)")
		err := Install(ctx, e.DB, tb.Name)
		if err == nil || !strings.Contains(err.Error(), "table "+mine.Name+" holds") || !strings.Contains(err.Error(), "drop or rename that index") {
			t.Fatalf("Install = %v; want an error naming %s and saying to drop or rename that index", err, mine.Name)
		}
		for _, n := range []engine.Table{tb, side} {
			if kind, err := relationKind(ctx, e.DB, n); err != nil || kind != "" {
				t.Errorf("after the refused Install, %s is %q (%v); want nothing", n.Name, kind, err)
			}
		}
	})
}
