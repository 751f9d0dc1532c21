package migrations

import (
	"context"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/testdb"
)

// TestGooseProviderRunsGooseSQL runs the file GooseSQL writes with goose's
// own SQL runner (a goose.Provider over a directory holding it): Up creates
// exactly what Install creates, every object of the catalog named after
// the table compared (tables, columns, defaults, constraints, indexes,
// sequences, and SQLite's side view and its trigger, which
// TestGooseCommandRunsGooseSQL does not see); Install afterwards changes
// nothing; Down leaves no object named after the table.
func TestGooseProviderRunsGooseSQL(t *testing.T) {
	t.Parallel()
	testdb.ForEachEngine(t, func(t *testing.T, e *testdb.Env) {
		ctx := context.Background()
		name, installed := e.Table(t), e.Table(t)
		p := gooseProviderFor(t, e, name)
		if _, err := p.Up(ctx); err != nil {
			t.Fatalf("goose up: %v", err)
		}
		if err := Install(ctx, e.DB, installed); err != nil {
			t.Fatal(err)
		}
		byGoose, byInstall := catalogObjects(t, e, name), catalogObjects(t, e, installed)
		if len(byInstall) < 3 {
			t.Fatalf("Install created %d objects: %v", len(byInstall), byInstall)
		}
		if diff := cmp.Diff(byInstall, byGoose); diff != "" {
			t.Errorf("goose up (+) differs from Install (-):\n%s", diff)
		}
		if err := Install(ctx, e.DB, name); err != nil {
			t.Fatalf("Install after goose up: %v", err)
		}
		if diff := cmp.Diff(byGoose, catalogObjects(t, e, name)); diff != "" {
			t.Errorf("Install after goose up changed the catalog (-before +after):\n%s", diff)
		}
		if _, err := p.Down(ctx); err != nil {
			t.Fatalf("goose down: %v", err)
		}
		if left := catalogObjects(t, e, name); len(left) != 0 {
			t.Errorf("after goose down: %v", left)
		}
		if diff := cmp.Diff(byInstall, catalogObjects(t, e, installed)); diff != "" {
			t.Errorf("goose down touched another table (-before +after):\n%s", diff)
		}
	})
}

var mysqlAutoIncrementRE = regexp.MustCompile(` AUTO_INCREMENT=\d+`)

// catalogObjects describes, one string per object, everything in the
// catalog named after the jobs table name (the table, name_<suffix>,
// idx_name_<suffix> and what belongs to them), with name replaced by T.
func catalogObjects(t *testing.T, e *testdb.Env, name string) []string {
	t.Helper()
	var out []string
	switch e.Kind {
	case engine.Postgres:
		const ours = `n.nspname = current_schema() AND (c.relname = $1 OR left(c.relname, length($1) + 1) = $1 || '_' OR left(c.relname, length($1) + 5) = 'idx_' || $1 || '_')`
		out = testdb.Strings(t, e.DB, `SELECT c.relkind::text || ' ' || c.relname || ': ' || CASE
    WHEN c.relkind = 'i' THEN pg_get_indexdef(c.oid) || CASE WHEN x.indisvalid THEN '' ELSE ' INVALID' END
    WHEN c.relkind = 'v' THEN pg_get_viewdef(c.oid)
    ELSE (SELECT string_agg(a.attname || ' ' || format_type(a.atttypid, a.atttypmod)
                 || CASE WHEN a.attnotnull THEN ' NOT NULL' ELSE '' END
                 || COALESCE(' DEFAULT ' || pg_get_expr(d.adbin, d.adrelid), ''), ', ' ORDER BY a.attnum)
          FROM pg_attribute a LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
          WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped) END
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace LEFT JOIN pg_index x ON x.indexrelid = c.oid
WHERE `+ours+`
UNION ALL
SELECT 'constraint ' || con.conname || ' of ' || c.relname || ': ' || pg_get_constraintdef(con.oid)
FROM pg_constraint con JOIN pg_class c ON c.oid = con.conrelid JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE `+ours+`
UNION ALL
SELECT 'trigger ' || tg.tgname || ': ' || pg_get_triggerdef(tg.oid)
FROM pg_trigger tg JOIN pg_class c ON c.oid = tg.tgrelid JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE NOT tg.tgisinternal AND `+ours+`
ORDER BY 1`, name)
	case engine.MySQL:
		for _, tn := range testdb.Strings(t, e.DB, `SELECT TABLE_NAME FROM information_schema.TABLES
WHERE TABLE_SCHEMA = DATABASE() AND (TABLE_NAME = ? OR LEFT(TABLE_NAME, CHAR_LENGTH(?) + 1) = CONCAT(?, '_')) ORDER BY TABLE_NAME`, name, name, name) {
			var n, ddl string
			if err := e.DB.QueryRowContext(context.Background(), "SHOW CREATE TABLE `"+tn+"`").Scan(&n, &ddl); err != nil {
				t.Fatal(err)
			}
			out = append(out, mysqlAutoIncrementRE.ReplaceAllString(ddl, ""))
		}
		out = append(out, testdb.Strings(t, e.DB, `SELECT CONCAT(TRIGGER_NAME, ': ', ACTION_STATEMENT) FROM information_schema.TRIGGERS
WHERE TRIGGER_SCHEMA = DATABASE() AND (EVENT_OBJECT_TABLE = ? OR LEFT(EVENT_OBJECT_TABLE, CHAR_LENGTH(?) + 1) = CONCAT(?, '_'))`, name, name, name)...)
	case engine.SQLite:
		out = testdb.Strings(t, e.DB, `SELECT type || ' ' || name || ' of ' || tbl_name || ': ' || COALESCE(sql, '') FROM sqlite_master
WHERE tbl_name = ?1 COLLATE NOCASE OR substr(tbl_name, 1, length(?1) + 1) = ?1 || '_' COLLATE NOCASE ORDER BY type, name`, name)
	}
	for i, s := range out {
		out[i] = strings.ReplaceAll(s, name, "T")
	}
	return out
}
