package migrations

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/jobqueue/jobqueue/internal/ddl"
	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/testdb"
)

// wantColumns is the version 2 table of SPEC section 2 as each engine's
// catalog shows it (see testColumns); table is the table name (PostgreSQL
// names the id sequence after it).
func wantColumns(k engine.Kind, table string, mariaDB bool) []testColumn {
	switch k {
	case engine.Postgres:
		ts := "timestamp without time zone"
		return []testColumn{
			{Name: "id", Type: "bigint", NotNull: true, Default: fmt.Sprintf("nextval('%s_id_seq'::regclass)", table)},
			{Name: "name", Type: "character varying(255)", NotNull: true},
			{Name: "type", Type: "character varying(64)", NotNull: true, Default: "'default'::character varying"},
			{Name: "payload", Type: "jsonb", NotNull: true},
			{Name: "status", Type: "character varying(20)", NotNull: true, Default: "'pending'::character varying"},
			{Name: "attempts", Type: "integer", NotNull: true, Default: "0"},
			{Name: "claim_token", Type: "character varying(64)"},
			{Name: "lease_until", Type: ts},
			{Name: "max_attempts", Type: "integer", NotNull: true},
			{Name: "base_delay", Type: "integer", NotNull: true},
			{Name: "max_delay", Type: "integer", NotNull: true},
			{Name: "error", Type: "text"},
			{Name: "scheduled_at", Type: ts, NotNull: true},
			{Name: "expires_at", Type: ts},
			{Name: "finished_at", Type: ts},
			{Name: "created_at", Type: ts, NotNull: true},
		}
	case engine.MySQL:
		bin := "utf8mb4_bin"
		payload := testColumn{Name: "payload", Type: "json", NotNull: true}
		if mariaDB {
			// MariaDB's JSON is LONGTEXT with a json_valid check (tested apart).
			payload = testColumn{Name: "payload", Type: "longtext", NotNull: true, Extra: bin}
		}
		return []testColumn{
			{Name: "id", Type: "bigint unsigned", NotNull: true, Extra: "auto_increment"},
			{Name: "name", Type: "varchar(255)", NotNull: true, Extra: bin},
			{Name: "type", Type: "varchar(64)", NotNull: true, Default: "default", Extra: bin},
			payload,
			{Name: "status", Type: "enum('pending','in_progress','completed','failed','expired')", NotNull: true, Default: "pending", Extra: bin},
			{Name: "attempts", Type: "int unsigned", NotNull: true, Default: "0"},
			{Name: "claim_token", Type: "varchar(64)", Extra: bin},
			{Name: "lease_until", Type: "datetime"},
			{Name: "max_attempts", Type: "int unsigned", NotNull: true},
			{Name: "base_delay", Type: "int unsigned", NotNull: true},
			{Name: "max_delay", Type: "int unsigned", NotNull: true},
			{Name: "error", Type: "text", Extra: bin},
			{Name: "scheduled_at", Type: "datetime", NotNull: true},
			{Name: "expires_at", Type: "datetime"},
			{Name: "finished_at", Type: "datetime"},
			{Name: "created_at", Type: "datetime", NotNull: true},
		}
	default:
		return []testColumn{
			{Name: "id", Type: "INTEGER", Extra: "pk"},
			{Name: "name", Type: "VARCHAR(255)", NotNull: true},
			{Name: "type", Type: "VARCHAR(64)", NotNull: true, Default: "'default'"},
			{Name: "payload", Type: "TEXT", NotNull: true},
			{Name: "status", Type: "VARCHAR(20)", NotNull: true, Default: "'pending'"},
			{Name: "attempts", Type: "INTEGER", NotNull: true, Default: "0"},
			{Name: "claim_token", Type: "VARCHAR(64)"},
			{Name: "lease_until", Type: "DATETIME"},
			{Name: "max_attempts", Type: "INTEGER", NotNull: true},
			{Name: "base_delay", Type: "INTEGER", NotNull: true},
			{Name: "max_delay", Type: "INTEGER", NotNull: true},
			{Name: "error", Type: "TEXT"},
			{Name: "scheduled_at", Type: "DATETIME", NotNull: true},
			{Name: "expires_at", Type: "DATETIME"},
			{Name: "finished_at", Type: "DATETIME"},
			{Name: "created_at", Type: "DATETIME", NotNull: true},
		}
	}
}

// wantIndexes is the four indexes of SPEC section 2 (plus the primary key's
// where the engine keeps one), with their names spelled out per engine.
func wantIndexes(k engine.Kind, table string) []testIndex {
	var prefix string
	var out []testIndex
	switch k {
	case engine.Postgres:
		prefix = "idx_" + table + "_"
		out = append(out, testIndex{Name: table + "_pkey", Unique: true, Columns: []string{"id"}})
	case engine.MySQL:
		prefix = "idx_"
		out = append(out, testIndex{Name: "PRIMARY", Unique: true, Columns: []string{"id"}})
	default:
		prefix = "idx_" + table + "_"
	}
	name := func(suffix string) string {
		n := prefix + suffix
		if k == engine.Postgres && len(n) > 63 {
			n = n[:63] // PostgreSQL's identifier limit
		}
		return n
	}
	out = append(out,
		testIndex{Name: name("lease_until"), Columns: []string{"lease_until"}},
		testIndex{Name: name("status_expires"), Columns: []string{"status", "expires_at"}},
		testIndex{Name: name("status_scheduled"), Columns: []string{"status", "scheduled_at", "id"}},
		testIndex{Name: name("type_status_scheduled"), Columns: []string{"type", "status", "scheduled_at", "id"}},
	)
	sortIndexes(out) // in name order, as testIndexes returns them
	return out
}

func sortIndexes(ix []testIndex) {
	slices.SortFunc(ix, func(a, b testIndex) int { return strings.Compare(a.Name, b.Name) })
}

func TestInstallCreatesVersion2Table(t *testing.T) {
	t.Parallel()
	testdb.ForEachEngine(t, func(t *testing.T, e *testdb.Env) {
		k, db := e.Kind, e.DB
		name := e.Table(t)
		tb := tableOf(t, k, name)
		if err := Install(context.Background(), db, name); err != nil {
			t.Fatal(err)
		}
		mariaDB := k == engine.MySQL && isMariaDB(t, db)
		if diff := cmp.Diff(wantColumns(k, name, mariaDB), testColumns(t, db, tb)); diff != "" {
			t.Errorf("columns (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff(wantIndexes(k, name), testIndexes(t, db, tb)); diff != "" {
			t.Errorf("indexes (-want +got):\n%s", diff)
		}
		switch k {
		case engine.MySQL:
			if got := testIDs(t, db, tb)[1]; got != "InnoDB utf8mb4_bin" {
				t.Errorf("table options %q, want InnoDB utf8mb4_bin", got)
			}
			if mariaDB {
				var check string
				if err := db.QueryRow(`SELECT CHECK_CLAUSE FROM information_schema.CHECK_CONSTRAINTS
WHERE CONSTRAINT_SCHEMA = DATABASE() AND TABLE_NAME = ?`, name).Scan(&check); err != nil {
					t.Fatalf("payload's JSON check: %v", err)
				}
				if !strings.Contains(check, "json_valid(`payload`)") {
					t.Errorf("payload check %q, want json_valid(`payload`)", check)
				}
			}
		case engine.SQLite:
			var create string
			if err := db.QueryRow(`SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?`, name).Scan(&create); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(create, "INTEGER PRIMARY KEY AUTOINCREMENT") {
				t.Errorf("id is not INTEGER PRIMARY KEY AUTOINCREMENT: %s", create)
			}
			// The database is this test's own: Install ran through goose
			// with versioning disabled, so no goose version table exists.
			tables := testdb.Strings(t, db, `SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name`)
			want := []string{"sqlite_sequence", name}
			for _, st := range ddl.SideTables() {
				want = append(want, ddl.Side(tb, st.Suffix).Name)
			}
			slices.Sort(want)
			if diff := cmp.Diff(want, tables); diff != "" {
				t.Errorf("tables after Install (-want +got):\n%s", diff)
			}
			// The view of keyed enqueues and its trigger (ddl keyedView).
			others := testdb.Strings(t, db, `SELECT type || ' ' || name FROM sqlite_master WHERE type IN ('view', 'trigger') ORDER BY name`)
			if want := []string{"view " + name + "_keyed", "trigger " + name + "_keyed_insert"}; !slices.Equal(others, want) {
				t.Errorf("views and triggers after Install: %q, want %q", others, want)
			}
		}
		st, err := inspect(context.Background(), db, tb)
		if err != nil || st != tableV2 {
			t.Errorf("inspect = %v, %v; want version 2", st, err)
		}
	})
}

func TestInstallAgreesWithSchemaSQL(t *testing.T) {
	t.Parallel()
	testdb.ForEachEngine(t, func(t *testing.T, e *testdb.Env) {
		k, db := e.Kind, e.DB
		fromFile, installed := e.Table(t), e.Table(t)
		mustExec(t, db, schemaSQL(t, k, fromFile)...)
		if err := Install(context.Background(), db, installed); err != nil {
			t.Fatal(err)
		}
		a := takeSnapshot(t, db, tableOf(t, k, fromFile)).normalized(fromFile)
		b := takeSnapshot(t, db, tableOf(t, k, installed)).normalized(installed)
		if k == engine.Postgres {
			// Index OIDs differ between any two tables: compare the rest.
			a.IDs, b.IDs = nil, nil
		}
		if k == engine.SQLite {
			// Root pages differ; the CREATE statements' whitespace may too.
			a.IDs, b.IDs = nil, nil
		}
		if diff := cmp.Diff(a, b); diff != "" {
			t.Errorf("sql/%s/schema.sql (-) and Install (+) differ:\n%s", k, diff)
		}
		if len(a.Columns) != 16 || len(a.Indexes) < 4 {
			t.Errorf("schema.sql table has %d columns and %d indexes; want 16 and the four of SPEC section 2", len(a.Columns), len(a.Indexes))
		}
	})
}
