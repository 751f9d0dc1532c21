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

// TestGooseUpRefusesWrongIndexes runs the goose command over the file
// GooseSQL writes on a version 2 table that `jobqueue install` made
// before the team adopted goose, one of whose indexes (of the jobs table,
// or <table>_unique's unique index on live_key) was then spoiled in one
// of the ways Install repairs (TestInstallRebuildsIndexesNotLikeOurs,
// TestInstallRepairsSideIndexes). `goose up` fails, saying which index and
// to run jobqueue install, and changes nothing (goose records no
// version); after `jobqueue install` (Install), `goose up` goes through.
// SQL cannot rebuild an index only when it is wrong on SQLite, nor show a
// MySQL index that MariaDB ignores without naming a column MySQL lacks,
// so the file refuses rather than repairs, as it refuses a version 1
// table and names jobqueue migrate. `goose up` went through, recorded as
// applied, the wrong index left as it was (on MySQL a dropped one left
// missing: the indexes are part of CREATE TABLE IF NOT EXISTS).
func TestGooseUpRefusesWrongIndexes(t *testing.T) {
	t.Parallel()
	// replace drops the index named ix of tb and creates create (see
	// fillIndexSQL) in its place.
	replace := func(tb engine.Table, ix, create string) []string {
		return []string{dropIndexSQL(tb, ix), fillIndexSQL(tb, create, ix)}
	}
	jobsIndex := func(suffix string) func(engine.Table) (engine.Table, string) {
		return func(tb engine.Table) (engine.Table, string) { return tb, tb.IndexName(suffix) }
	}
	sideIndex := func(tb engine.Table) (engine.Table, string) {
		side := ddl.Side(tb, "unique")
		return side, ddl.IndexName(side, "live_key")
	}
	cases := []struct {
		name  string
		kind  engine.Kind // "" for every engine
		index func(tb engine.Table) (engine.Table, string)
		spoil func(tb engine.Table, ix string) []string
		ok    bool // the index is right for Install too: goose up goes through
	}{
		{"a column left out", "", jobsIndex("status_scheduled"), func(tb engine.Table, ix string) []string {
			return replace(tb, ix, "CREATE INDEX %s ON %t (status, scheduled_at)")
		}, false},
		{"unique", "", jobsIndex("lease_until"), func(tb engine.Table, ix string) []string {
			return replace(tb, ix, "CREATE UNIQUE INDEX %s ON %t (lease_until)")
		}, false},
		{"side index not unique", "", sideIndex, func(tb engine.Table, ix string) []string {
			return replace(tb, ix, "CREATE INDEX %s ON %t (live_key)")
		}, false},
		{"dropped", engine.MySQL, jobsIndex("status_expires"), func(tb engine.Table, ix string) []string {
			return []string{dropIndexSQL(tb, ix)}
		}, false},
		{"side index dropped", engine.MySQL, sideIndex, func(tb engine.Table, ix string) []string {
			return []string{dropIndexSQL(tb, ix)}
		}, false},
		{"invisible", engine.MySQL, jobsIndex("type_status_scheduled"), func(tb engine.Table, ix string) []string {
			return []string{"ALTER TABLE " + tb.Quoted() + " ALTER INDEX `" + ix + "` INVISIBLE"}
		}, false},
		{"desc", engine.MySQL, jobsIndex("lease_until"), func(tb engine.Table, ix string) []string {
			return replace(tb, ix, "CREATE INDEX %s ON %t (lease_until DESC)")
		}, false},
		{"nulls first", engine.Postgres, jobsIndex("status_scheduled"), func(tb engine.Table, ix string) []string {
			return replace(tb, ix, "CREATE INDEX %s ON %t (status, scheduled_at NULLS FIRST, id)")
		}, false},
		{"include", engine.Postgres, jobsIndex("type_status_scheduled"), func(tb engine.Table, ix string) []string {
			return replace(tb, ix, "CREATE INDEX %s ON %t (type, status, scheduled_at, id) INCLUDE (name)")
		}, false},
		{"another collation", engine.Postgres, jobsIndex("type_status_scheduled"), func(tb engine.Table, ix string) []string {
			return replace(tb, ix, `CREATE INDEX %s ON %t (type COLLATE "C", status, scheduled_at, id)`)
		}, false},
		{"hash", engine.Postgres, jobsIndex("lease_until"), func(tb engine.Table, ix string) []string {
			return replace(tb, ix, "CREATE INDEX %s ON %t USING hash (lease_until)")
		}, false},
		{"invalid", engine.Postgres, jobsIndex("status_expires"), func(tb engine.Table, ix string) []string {
			return []string{`UPDATE pg_index SET indisvalid = false WHERE indexrelid = to_regclass('"` + ix + `"')`}
		}, false},
		{"side index nulls not distinct", engine.Postgres, sideIndex, func(tb engine.Table, ix string) []string {
			return replace(tb, ix, "CREATE UNIQUE INDEX %s ON %t (live_key) NULLS NOT DISTINCT")
		}, false},
		{"fillfactor", engine.Postgres, jobsIndex("lease_until"), func(tb engine.Table, ix string) []string {
			return replace(tb, ix, "CREATE INDEX %s ON %t (lease_until) WITH (fillfactor = 70)")
		}, true},
		{"name in upper case", engine.MySQL, jobsIndex("lease_until"), func(tb engine.Table, ix string) []string {
			return replace(tb, ix, "CREATE INDEX `IDX_LEASE_UNTIL` ON %t (lease_until)")
		}, true},
		{"spelled otherwise", engine.SQLite, jobsIndex("status_expires"), func(tb engine.Table, ix string) []string {
			return replace(tb, ix, "create  index %s on %t(\"status\" ,  [expires_at] ASC)")
		}, true},
		{"partial", engine.SQLite, jobsIndex("status_scheduled"), func(tb engine.Table, ix string) []string {
			return replace(tb, ix, "CREATE INDEX %s ON %t (status, scheduled_at, id) WHERE status = 'pending'")
		}, false},
		{"nocase", engine.SQLite, jobsIndex("status_expires"), func(tb engine.Table, ix string) []string {
			return replace(tb, ix, "CREATE INDEX %s ON %t (status COLLATE NOCASE, expires_at)")
		}, false},
		{"side index desc", engine.SQLite, sideIndex, func(tb engine.Table, ix string) []string {
			return replace(tb, ix, "CREATE UNIQUE INDEX %s ON %t (live_key DESC)")
		}, false},
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
				on, ix := c.index(tb)
				spoil := c.spoil(on, ix)
				skipUnlessServerTakes(t, e, spoil)
				if e.Kind == engine.MySQL && isMariaDB(t, e.DB) {
					for i, q := range spoil {
						spoil[i] = strings.Replace(q, " INVISIBLE", " IGNORED", 1)
					}
				}
				mustExec(t, e.DB, spoil...)
				// testIDs, which changes when an index is made or
				// rebuilt: tablesSnapshot reads index definitions only
				// in the forms Install makes.
				ids := func() map[string][]string {
					out := map[string][]string{tb.Name: testIDs(t, e.DB, tb)}
					for _, st := range ddl.SideTables() {
						side := ddl.Side(tb, st.Suffix)
						out[side.Name] = testIDs(t, e.DB, side)
					}
					return out
				}
				before := ids()

				dir, versionTable := gooseDirFor(t, e, name)
				out, err := gooseCommandOutput(t, e, dir, versionTable, "up")
				if c.ok {
					if err != nil {
						t.Errorf("goose up over an index Install takes for right: %v\n%s", err, out)
					}
					return
				}
				if err == nil {
					t.Fatalf("goose up went through with index %s of %s wrong:\n%s", ix, on.Name, out)
				}
				if want := wrongIndexMessage(tb, on, ix); !strings.Contains(out, want) {
					t.Errorf("goose up's output does not say %q:\n%s", want, out)
				}
				if diff := cmp.Diff(before, ids()); diff != "" {
					t.Errorf("the refused goose up changed the tables (-before +after):\n%s", diff)
				}
				if st := runGooseCommand(t, e, dir, versionTable, "version"); !strings.Contains(st, "version 0") {
					t.Errorf("goose recorded a version after the refused up: %s", st)
				}

				if err := Install(ctx, e.DB, name); err != nil {
					t.Fatalf("Install: %v", err)
				}
				if out, err := gooseCommandOutput(t, e, dir, versionTable, "up"); err != nil {
					t.Fatalf("goose up after Install: %v\n%s", err, out)
				}
			})
		}
	})
}
