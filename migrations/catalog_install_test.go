package migrations

// Catalog readers for the install tests. They read the engines' catalogs
// with queries of their own (pg_attribute and pg_indexes, SHOW INDEX and
// SHOW CREATE TABLE, pragma table_info and index_info) rather than with the
// package's inspect/columns/indexes, so that the tests check those too.

import (
	"context"
	"database/sql"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/testdb"
)

// testColumn is one column as a test sees it, normalized so that MySQL 8
// and MariaDB read alike (no integer display widths, unquoted string
// defaults, no "DEFAULT NULL").
type testColumn struct {
	Name    string
	Type    string
	NotNull bool
	Default string
	Extra   string // auto_increment (MySQL), pk (SQLite), collation (MySQL strings)
}

// testIndex is one index as a test sees it.
type testIndex struct {
	Name    string
	Unique  bool
	Columns []string
}

// snapshot is what the tests compare before and after an operation: the
// columns, the indexes and the table's definition (IDs holds what changes
// when an index is rebuilt: PostgreSQL index OIDs, SQLite's sqlite_master
// rows; MySQL's SHOW CREATE TABLE).
type snapshot struct {
	Columns []testColumn
	Indexes []testIndex
	IDs     []string
}

var testDisplayWidthRE = regexp.MustCompile(`\b(tinyint|smallint|mediumint|int|bigint)\(\d+\)`)

func tableOf(t *testing.T, k engine.Kind, name string) engine.Table {
	t.Helper()
	tb, err := engine.ParseTable(k, name)
	if err != nil {
		t.Fatal(err)
	}
	return tb
}

func testColumns(t *testing.T, db *sql.DB, tb engine.Table) []testColumn {
	t.Helper()
	ctx := context.Background()
	var q string
	switch tb.Kind {
	case engine.Postgres:
		q = `SELECT a.attname, format_type(a.atttypid, a.atttypmod), a.attnotnull,
       COALESCE(pg_get_expr(d.adbin, d.adrelid), ''), ''
FROM pg_attribute a LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
WHERE a.attrelid = to_regclass(quote_ident($1)) AND a.attnum > 0 AND NOT a.attisdropped
ORDER BY a.attnum`
	case engine.MySQL:
		q = `SELECT COLUMN_NAME, COLUMN_TYPE, IS_NULLABLE = 'NO', COALESCE(COLUMN_DEFAULT, ''),
       TRIM(CONCAT(EXTRA, ' ', COALESCE(COLLATION_NAME, '')))
FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ?
ORDER BY ORDINAL_POSITION`
	case engine.SQLite:
		q = `SELECT name, type, "notnull", COALESCE(dflt_value, ''), CASE WHEN pk > 0 THEN 'pk' ELSE '' END
FROM pragma_table_info(?) ORDER BY cid`
	}
	rows, err := db.QueryContext(ctx, q, tb.Name)
	if err != nil {
		t.Fatalf("read columns of %s: %v", tb.Name, err)
	}
	defer rows.Close()
	var cols []testColumn
	for rows.Next() {
		var c testColumn
		if err := rows.Scan(&c.Name, &c.Type, &c.NotNull, &c.Default, &c.Extra); err != nil {
			t.Fatal(err)
		}
		if tb.Kind == engine.MySQL {
			c.Type = testDisplayWidthRE.ReplaceAllString(strings.ToLower(c.Type), "$1")
			c.Extra = strings.ToLower(c.Extra)
			if c.Default == "NULL" && !c.NotNull {
				c.Default = ""
			}
			c.Default = strings.Trim(c.Default, "'")
		}
		cols = append(cols, c)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return cols
}

// autoIncrementRE matches the counter SHOW CREATE TABLE shows once rows exist.
var autoIncrementRE = regexp.MustCompile(` AUTO_INCREMENT=\d+`)

var pgIndexDefRE = regexp.MustCompile(`^CREATE (UNIQUE )?INDEX (\S+) ON \S+ USING btree \((.*)\)$`)

func testIndexes(t *testing.T, db *sql.DB, tb engine.Table) []testIndex {
	t.Helper()
	ctx := context.Background()
	var out []testIndex
	switch tb.Kind {
	case engine.Postgres:
		rows, err := db.QueryContext(ctx, `SELECT indexname, indexdef FROM pg_indexes
WHERE schemaname = current_schema() AND tablename = $1 ORDER BY indexname`, tb.Name)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		for rows.Next() {
			var name, def string
			if err := rows.Scan(&name, &def); err != nil {
				t.Fatal(err)
			}
			m := pgIndexDefRE.FindStringSubmatch(def)
			if m == nil || m[2] != name {
				t.Fatalf("index %s: unexpected definition %q", name, def)
			}
			out = append(out, testIndex{Name: name, Unique: m[1] != "", Columns: strings.Split(m[3], ", ")})
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
	case engine.MySQL:
		rows, err := db.QueryContext(ctx, "SHOW INDEX FROM "+tb.Quoted())
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		names, err := rows.Columns()
		if err != nil {
			t.Fatal(err)
		}
		byName := map[string]*testIndex{}
		var order []string
		for rows.Next() {
			vals := make([]sql.NullString, len(names))
			ptrs := make([]any, len(names))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if err := rows.Scan(ptrs...); err != nil {
				t.Fatal(err)
			}
			row := map[string]string{}
			for i, n := range names {
				row[n] = vals[i].String
			}
			ix, ok := byName[row["Key_name"]]
			if !ok {
				ix = &testIndex{Name: row["Key_name"], Unique: row["Non_unique"] == "0"}
				byName[ix.Name] = ix
				order = append(order, ix.Name)
			}
			ix.Columns = append(ix.Columns, row["Column_name"]) // rows come in Seq_in_index order
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		slices.Sort(order)
		for _, n := range order {
			out = append(out, *byName[n])
		}
	case engine.SQLite:
		rows, err := db.QueryContext(ctx, `SELECT name, "unique" FROM pragma_index_list(?) ORDER BY name`, tb.Name)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var ix testIndex
			if err := rows.Scan(&ix.Name, &ix.Unique); err != nil {
				t.Fatal(err)
			}
			out = append(out, ix)
		}
		rows.Close()
		for i := range out {
			cr, err := db.QueryContext(ctx, `SELECT name FROM pragma_index_info(?) ORDER BY seqno`, out[i].Name)
			if err != nil {
				t.Fatal(err)
			}
			for cr.Next() {
				var c sql.NullString
				if err := cr.Scan(&c); err != nil {
					t.Fatal(err)
				}
				out[i].Columns = append(out[i].Columns, c.String)
			}
			cr.Close()
		}
	}
	return out
}

func testIDs(t *testing.T, db *sql.DB, tb engine.Table) []string {
	t.Helper()
	ctx := context.Background()
	var q string
	switch tb.Kind {
	case engine.Postgres:
		q = `SELECT i.relname || ' oid ' || i.oid FROM pg_index ix JOIN pg_class i ON i.oid = ix.indexrelid
WHERE ix.indrelid = to_regclass(quote_ident($1)) ORDER BY 1`
	case engine.SQLite:
		q = `SELECT type || ' ' || name || ' page ' || rootpage || ': ' || COALESCE(sql, '') FROM sqlite_master WHERE tbl_name = ? ORDER BY name`
	case engine.MySQL:
		var name, ddl string
		if err := db.QueryRowContext(ctx, "SHOW CREATE TABLE "+tb.Quoted()).Scan(&name, &ddl); err != nil {
			t.Fatal(err)
		}
		var opts string
		if err := db.QueryRowContext(ctx, `SELECT CONCAT(ENGINE, ' ', TABLE_COLLATION) FROM information_schema.TABLES
WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ?`, tb.Name).Scan(&opts); err != nil {
			t.Fatal(err)
		}
		return []string{autoIncrementRE.ReplaceAllString(ddl, ""), opts}
	}
	return testdb.Strings(t, db, q, tb.Name)
}

func takeSnapshot(t *testing.T, db *sql.DB, tb engine.Table) snapshot {
	t.Helper()
	return snapshot{Columns: testColumns(t, db, tb), Indexes: testIndexes(t, db, tb), IDs: testIDs(t, db, tb)}
}

// tableImage is a table's catalog (takeSnapshot) and rows (dumpRows), taken
// before a call that must leave the table as it was.
type tableImage struct {
	catalog snapshot
	rows    []string
}

// imageOf takes tb's tableImage.
func imageOf(t *testing.T, db *sql.DB, tb engine.Table) tableImage {
	t.Helper()
	return tableImage{catalog: takeSnapshot(t, db, tb), rows: dumpRows(t, db, tb)}
}

// checkSame fails the test, saying that what changed it, where tb's
// catalog or rows now differ from im's.
func (im tableImage) checkSame(t *testing.T, db *sql.DB, tb engine.Table, what string) {
	t.Helper()
	if diff := cmp.Diff(im.catalog, takeSnapshot(t, db, tb)); diff != "" {
		t.Errorf("%s changed the table's catalog (-before +after):\n%s", what, diff)
	}
	if diff := cmp.Diff(im.rows, dumpRows(t, db, tb)); diff != "" {
		t.Errorf("%s changed the table's rows (-before +after):\n%s", what, diff)
	}
}

// normalized replaces the table names in s by "T", so that two tables'
// snapshots can be compared.
func (s snapshot) normalized(names ...string) snapshot {
	repl := func(v string) string {
		for _, n := range names {
			v = strings.ReplaceAll(v, n, "T")
		}
		return v
	}
	var out snapshot
	for _, c := range s.Columns {
		c.Default = repl(c.Default)
		out.Columns = append(out.Columns, c)
	}
	for _, ix := range s.Indexes {
		ix.Name = repl(ix.Name)
		out.Indexes = append(out.Indexes, ix)
	}
	for _, id := range s.IDs {
		out.IDs = append(out.IDs, repl(id))
	}
	return out
}

func mustExec(t *testing.T, db *sql.DB, stmts ...string) {
	t.Helper()
	for _, s := range stmts {
		if _, err := db.ExecContext(context.Background(), s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
}

// isMariaDB tells MariaDB from MySQL (they report JSON columns differently).
func isMariaDB(t *testing.T, db *sql.DB) bool {
	t.Helper()
	var v string
	if err := db.QueryRow("SELECT VERSION()").Scan(&v); err != nil {
		t.Fatal(err)
	}
	return strings.Contains(strings.ToLower(v), "mariadb")
}

// v1DDL is the version 1 table of SPEC section 4 for tb, with its indexes.
func v1DDL(tb engine.Table) []string {
	q, n := tb.Quoted(), tb.Name
	switch tb.Kind {
	case engine.Postgres:
		return []string{
			`CREATE TABLE ` + q + ` (id BIGSERIAL PRIMARY KEY, name VARCHAR(255) NOT NULL,
  type VARCHAR(64) NOT NULL DEFAULT 'default', payload JSONB NOT NULL,
  status VARCHAR(20) NOT NULL DEFAULT 'pending', retry_count INT NOT NULL DEFAULT 0,
  error TEXT NULL, scheduled_at TIMESTAMP NOT NULL, locked_at TIMESTAMP NULL,
  expires_at TIMESTAMP NULL, created_at TIMESTAMP NOT NULL)`,
			`CREATE INDEX "idx_` + n + `_status_scheduled" ON ` + q + ` (status, scheduled_at)`,
			`CREATE INDEX "idx_` + n + `_type" ON ` + q + ` (type)`,
			`CREATE INDEX "idx_` + n + `_locked_at" ON ` + q + ` (locked_at)`,
		}
	case engine.MySQL:
		return []string{"CREATE TABLE " + q + ` (id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY,
  name VARCHAR(255) NOT NULL, type VARCHAR(64) NOT NULL DEFAULT 'default', payload JSON NOT NULL,
  status ENUM('pending','in_progress','completed','failed') NOT NULL DEFAULT 'pending',
  retry_count INT UNSIGNED NOT NULL DEFAULT 0, error TEXT NULL, scheduled_at DATETIME NOT NULL,
  locked_at DATETIME NULL, expires_at DATETIME NULL, created_at TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP,
  INDEX idx_status_scheduled (status, scheduled_at), INDEX idx_type (type), INDEX idx_locked_at (locked_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin`}
	default:
		return []string{
			`CREATE TABLE ` + q + ` (id INTEGER PRIMARY KEY AUTOINCREMENT, name VARCHAR(255) NOT NULL,
  type VARCHAR(64) NOT NULL DEFAULT 'default', payload TEXT NOT NULL,
  status VARCHAR(20) NOT NULL DEFAULT 'pending', retry_count INTEGER NOT NULL DEFAULT 0,
  error TEXT, scheduled_at DATETIME NOT NULL, locked_at DATETIME, expires_at DATETIME,
  created_at DATETIME NOT NULL)`,
			`CREATE INDEX "idx_` + n + `_status_scheduled" ON ` + q + ` (status, scheduled_at)`,
			`CREATE INDEX "idx_` + n + `_type" ON ` + q + ` (type)`,
			`CREATE INDEX "idx_` + n + `_locked_at" ON ` + q + ` (locked_at)`,
		}
	}
}

// v1Rows inserts a few version 1 jobs into tb.
func v1Rows(tb engine.Table) string {
	return `INSERT INTO ` + tb.Quoted() + ` (name, type, payload, status, retry_count, error, scheduled_at, locked_at, created_at) VALUES
 ('send', 'email', '{"to":"a@example.com"}', 'pending', 0, NULL, '2026-01-02 03:04:05', NULL, '2026-01-01 00:00:00'),
 ('send', 'email', '{"to":"b@example.com"}', 'in_progress', 1, 'boom', '2026-01-02 03:04:05', '2026-01-02 03:05:00', '2026-01-01 00:00:00'),
 ('bill', 'default', '{}', 'failed', 3, 'no card', '2026-01-02 03:04:05', NULL, '2026-01-01 00:00:00')`
}

// dumpRows is every row of tb as text, in id order (dump, for a Table).
func dumpRows(t *testing.T, db *sql.DB, tb engine.Table) []string {
	t.Helper()
	return dump(t, db, tb.Kind, tb.Name)
}

// schemaSQL is sql/<engine>/schema.sql with the table jobs renamed to name
// (and its side tables jobs_<suffix> to name_<suffix>), as separate
// statements.
func schemaSQL(t *testing.T, k engine.Kind, name string) []string {
	t.Helper()
	b, err := os.ReadFile("../sql/" + string(k) + "/schema.sql")
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for l := range strings.SplitSeq(string(b), "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "--") {
			lines = append(lines, l)
		}
	}
	s := strings.Join(lines, "\n")
	s = strings.ReplaceAll(s, "idx_jobs_", "idx_"+name+"_")
	s = regexp.MustCompile(`\bjobs\b`).ReplaceAllString(s, name)
	s = regexp.MustCompile(`\bjobs_`).ReplaceAllString(s, name+"_") // side tables
	var stmts []string
	for st := range strings.SplitSeq(s, ";") {
		if strings.TrimSpace(st) != "" {
			stmts = append(stmts, st)
		}
	}
	if len(stmts) == 0 {
		t.Fatalf("no statements in sql/%s/schema.sql", k)
	}
	return stmts
}
