package migrations

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/jobqueue/jobqueue/internal/ddl"
	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/testdb"
)

// TestInstallRebuildsIndexesNotLikeOurs: Install rebuilds an index of ours
// that has the right name but is not the plain B-tree on our columns that
// the queries need, as it rebuilds one on other columns: one with a column
// left out; on PostgreSQL one of another access method (hash), one left
// invalid by a failed CREATE INDEX CONCURRENTLY, one with another collation
// or operator class; on MySQL, whose index names ignore case, an index
// IDX_LEASE_UNTIL on other columns, and one made invisible (MariaDB:
// ignored); on SQLite one with COLLATE NOCASE. Install kept all of these
// but the first (MySQL's IDX_LEASE_UNTIL it refused, "is the name taken by
// another table's index?"). On PostgreSQL it also rebuilds one whose
// column's NULLs sort first (NULLS FIRST), one with an INCLUDE list (it
// kept both: the catalog query read neither), one in descending order,
// partial, on an expression or unique. A further Install changes nothing
// (testIndexRepairs).
func TestInstallRebuildsIndexesNotLikeOurs(t *testing.T) {
	t.Parallel()
	// replace drops our index suffix of tb and creates create (see
	// fillIndexSQL) in its place.
	replace := func(suffix, create string) func(engine.Table) []string {
		return func(tb engine.Table) []string {
			ix := tb.IndexName(suffix)
			return []string{dropIndexSQL(tb, ix), fillIndexSQL(tb, create, ix)}
		}
	}
	cases := []indexRepairCase{
		{"a column left out", "", replace("status_scheduled", "CREATE INDEX %s ON %t (status, scheduled_at)")},
		{"hash", engine.Postgres, replace("lease_until", "CREATE INDEX %s ON %t USING hash (lease_until)")},
		{"brin", engine.Postgres, replace("status_expires", "CREATE INDEX %s ON %t USING brin (status, expires_at)")},
		{"invalid", engine.Postgres, func(tb engine.Table) []string {
			// What a CREATE INDEX CONCURRENTLY that failed leaves.
			return []string{`UPDATE pg_index SET indisvalid = false WHERE indexrelid = to_regclass('"` + tb.IndexName("status_expires") + `"')`}
		}},
		{"another collation", engine.Postgres, replace("type_status_scheduled", `CREATE INDEX %s ON %t (type COLLATE "C", status, scheduled_at, id)`)},
		{"another operator class", engine.Postgres, replace("status_scheduled", "CREATE INDEX %s ON %t (status varchar_pattern_ops, scheduled_at, id)")},
		{"nulls first", engine.Postgres, replace("status_scheduled", "CREATE INDEX %s ON %t (status, scheduled_at NULLS FIRST, id)")},
		{"desc", engine.Postgres, replace("lease_until", "CREATE INDEX %s ON %t (lease_until DESC)")},
		{"desc nulls last", engine.Postgres, replace("status_expires", "CREATE INDEX %s ON %t (status, expires_at DESC NULLS LAST)")},
		{"include", engine.Postgres, replace("type_status_scheduled", "CREATE INDEX %s ON %t (type, status, scheduled_at, id) INCLUDE (name)")},
		{"partial", engine.Postgres, replace("status_scheduled", "CREATE INDEX %s ON %t (status, scheduled_at, id) WHERE status = 'pending'")},
		{"expression", engine.Postgres, replace("lease_until", "CREATE INDEX %s ON %t ((lease_until + interval '1 hour'))")},
		{"unique", engine.Postgres, replace("status_scheduled", "CREATE UNIQUE INDEX %s ON %t (status, scheduled_at, id)")},
		{"name in upper case on other columns", engine.MySQL, func(tb engine.Table) []string {
			return []string{dropIndexSQL(tb, "idx_lease_until"), "CREATE INDEX `IDX_LEASE_UNTIL` ON " + tb.Quoted() + " (created_at)"}
		}},
		// Not used by the optimizer: MySQL's INVISIBLE, MariaDB's IGNORED
		// (testIndexRepairs picks the server's spelling).
		{"invisible", engine.MySQL, func(tb engine.Table) []string {
			return []string{"ALTER TABLE " + tb.Quoted() + " ALTER INDEX `idx_status_expires` INVISIBLE"}
		}},
		{"invisible on other columns", engine.MySQL, func(tb engine.Table) []string {
			return []string{dropIndexSQL(tb, "idx_lease_until"), "CREATE INDEX `idx_lease_until` ON " + tb.Quoted() + " (created_at)",
				"ALTER TABLE " + tb.Quoted() + " ALTER INDEX `idx_lease_until` INVISIBLE"}
		}},
		{"nocase", engine.SQLite, replace("status_scheduled", "CREATE INDEX %s ON %t (status COLLATE NOCASE, scheduled_at, id)")},
	}
	jobsTable := func(tb engine.Table) engine.Table { return tb }
	testIndexRepairs(t, cases, jobsTable, func(t *testing.T, e *testdb.Env, tb engine.Table) {
		if diff := cmp.Diff(wantIndexes(e.Kind, tb.Name), testIndexes(t, e.DB, tb)); diff != "" {
			t.Errorf("indexes (-want +got):\n%s", diff)
		}
		switch e.Kind {
		case engine.Postgres:
			if bad := testdb.Strings(t, e.DB, `SELECT i.relname FROM pg_index ix JOIN pg_class i ON i.oid = ix.indexrelid
WHERE ix.indrelid = to_regclass(quote_ident($1)) AND NOT (ix.indisvalid AND ix.indisready)`, tb.Name); len(bad) != 0 {
				t.Errorf("indexes still invalid: %v", bad)
			}
		case engine.SQLite:
			if bad := testdb.Strings(t, e.DB, `SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = ? AND sql LIKE '%COLLATE%'`, tb.Name); len(bad) != 0 {
				t.Errorf("indexes still with a collation: %v", bad)
			}
		}
	})
}

// fillIndexSQL is create with %s replaced by the quoted index name ix and
// %t by the quoted table tb.
func fillIndexSQL(tb engine.Table, create, ix string) string {
	return strings.NewReplacer("%s", ddl.QuoteIdent(tb.Kind, ix), "%t", tb.Quoted()).Replace(create)
}
