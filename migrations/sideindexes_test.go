package migrations

import (
	"context"
	"strings"
	"testing"

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
// replaced by a plain index stayed so (CREATE INDEX IF NOT EXISTS). On
// PostgreSQL 15+ it rebuilds one made NULLS NOT DISTINCT, which refused a
// second row holding no key (live_key NULL) and which it kept.
func TestInstallRepairsSideIndexes(t *testing.T) {
	t.Parallel()
	live := func(side engine.Table) string { return ddl.IndexName(side, "live_key") }
	cases := []indexRepairCase{
		{"dropped", "", func(side engine.Table) []string { return []string{dropIndexSQL(side, live(side))} }},
		{"not unique", "", func(side engine.Table) []string {
			return []string{dropIndexSQL(side, live(side)), createIndexOnSQL(side, live(side), "live_key")}
		}},
		{"on another column", "", func(side engine.Table) []string {
			return []string{dropIndexSQL(side, live(side)), createIndexOnSQL(side, live(side), "unique_key")}
		}},
		// PostgreSQL 15+: the rows that hold no key (live_key NULL) would
		// collide.
		{"nulls not distinct", engine.Postgres, func(side engine.Table) []string {
			return []string{dropIndexSQL(side, live(side)), `CREATE UNIQUE INDEX "` + live(side) + `" ON ` + side.Quoted() + " (live_key) NULLS NOT DISTINCT"}
		}},
		{"invisible", engine.MySQL, func(side engine.Table) []string {
			return []string{"ALTER TABLE " + side.Quoted() + " ALTER INDEX `" + live(side) + "` INVISIBLE"}
		}},
	}
	uniqueSide := func(tb engine.Table) engine.Table { return ddl.Side(tb, "unique") }
	testIndexRepairs(t, cases, uniqueSide, func(t *testing.T, e *testdb.Env, tb engine.Table) {
		side := uniqueSide(tb)
		insert := "INSERT INTO " + side.Quoted() + " (job_id, unique_key, live_key, held_until) VALUES (%d, 'k', 'k', '2026-01-01 00:00:00')"
		mustExec(t, e.DB, strings.Replace(insert, "%d", "1", 1))
		if _, err := e.DB.ExecContext(context.Background(), strings.Replace(insert, "%d", "2", 1)); err == nil {
			t.Errorf("a second row holding key k was accepted: the unique index on live_key is not there")
		}
		released := "INSERT INTO " + side.Quoted() + " (job_id, unique_key, live_key, held_until) VALUES (%d, 'k', NULL, '2026-01-01 00:00:00')"
		for _, id := range []string{"3", "4"} {
			if _, err := e.DB.ExecContext(context.Background(), strings.Replace(released, "%d", id, 1)); err != nil {
				t.Errorf("a row holding no key (live_key NULL) was refused next to another: %v", err)
			}
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
