package migrations

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/testdb"
)

// TestMigrateSQLiteKeepsExtraColumnDefinitions: SQLite's migration
// rebuilds the table, and columns the user added to the version 1 table
// keep their whole definition, as on PostgreSQL and MySQL, where they are
// left alone: NOT NULL without a default, CHECK, COLLATE, UNIQUE and
// REFERENCES (the quoted name and the comment in the definition
// included). It kept only the type, and the default (with NOT NULL when
// it had one): every one of the rules below was lost.
func TestMigrateSQLiteKeepsExtraColumnDefinitions(t *testing.T) {
	t.Parallel()
	e := testdb.New(t, engine.SQLite)
	ctx := context.Background()
	name := e.Table(t)
	tb := tableOf(t, engine.SQLite, name)
	owners := e.Table(t)
	mustExec(t, e.DB, `CREATE TABLE "`+owners+`" (id INTEGER PRIMARY KEY)`, `INSERT INTO "`+owners+`" (id) VALUES (1)`)
	ddl := v1DDL(tb)
	extra := `,
  tenant TEXT NOT NULL CHECK (tenant <> ''), -- whose job (a comment, with a comma)
  "Note, text" TEXT COLLATE NOCASE,
  code TEXT UNIQUE,
  owner_id INTEGER REFERENCES "` + owners + `" (id))`
	if !strings.HasSuffix(ddl[0], ")") {
		t.Fatalf("v1DDL's CREATE TABLE does not end with ): %s", ddl[0])
	}
	ddl[0] = strings.TrimSuffix(ddl[0], ")") + extra
	mustExec(t, e.DB, ddl...)
	mustExec(t, e.DB, `INSERT INTO `+tb.Quoted()+` (name, payload, status, scheduled_at, created_at, tenant, "Note, text", code, owner_id)
VALUES ('send', '{}', 'pending', '2026-01-02 03:04:05', '2026-01-01 00:00:00', 'acme', 'ABC', 'c1', 1)`)

	if err := Migrate(ctx, e.DB, testPolicy, name); err != nil {
		t.Fatal(err)
	}
	if st, err := inspect(ctx, e.DB, tb); err != nil || st != tableV2 {
		t.Fatalf("after Migrate: %v (%v)", st, err)
	}
	if got := testdb.Strings(t, e.DB, `SELECT tenant || ' ' || code || ' ' || owner_id FROM `+tb.Quoted()+` WHERE "Note, text" = 'abc'`); len(got) != 1 || got[0] != "acme c1 1" {
		t.Errorf("the row by its NOCASE note: %v; want [acme c1 1]", got)
	}
	insert := `INSERT INTO ` + tb.Quoted() + ` (name, payload, max_attempts, base_delay, max_delay, scheduled_at, created_at, tenant, code, owner_id)
VALUES ('send', '{}', 3, 60, 3600, '2026-01-02 03:04:05', '2026-01-01 00:00:00', `
	refused := []struct{ rule, values string }{
		{"", "'acme', 'c9', 1)"}, // the control: accepted
		{"NOT NULL", "NULL, 'c2', 1)"},
		{"CHECK", "'', 'c3', 1)"},
		{"UNIQUE", "'acme', 'c1', 1)"},
		{"REFERENCES", "'acme', 'c4', 7)"},
	}
	for _, r := range refused {
		conn, err := e.DB.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := conn.ExecContext(ctx, "PRAGMA foreign_keys = ON"); err != nil {
			t.Fatal(err)
		}
		_, err = conn.ExecContext(ctx, insert+r.values)
		switch {
		case r.rule == "" && err != nil:
			t.Errorf("the control insert of (%s: %v", r.values, err)
		case r.rule != "" && err == nil:
			t.Errorf("%s of a user's column was lost: the insert of (%s was accepted", r.rule, r.values)
		}
		if err := conn.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestSQLiteColumnDefs: the column definitions are split at top-level
// commas only (not in parentheses, literals, quoted names or comments),
// quoted names are unquoted for the key, and table constraints are left
// out.
func TestSQLiteColumnDefs(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, create string
		want         map[string]string
	}{
		{"plain", "CREATE TABLE x (a INT, b TEXT NOT NULL DEFAULT 'p, q')",
			map[string]string{"a": "a INT", "b": "b TEXT NOT NULL DEFAULT 'p, q'"}},
		{"quoted names", "CREATE TABLE \"x\" (\"A b\" INT, [c,d] TEXT, `e``f` REAL, \"check\" INT)",
			map[string]string{"a b": "\"A b\" INT", "c,d": "[c,d] TEXT", "e`f": "`e``f` REAL", "check": "\"check\" INT"}},
		{"parentheses and comments", "CREATE TABLE x (\n a NUMERIC(10, 2) CHECK (a IN (1, 2)), -- a, b\n b /* c, d */ INT\n)",
			map[string]string{"a": "a NUMERIC(10, 2) CHECK (a IN (1, 2))", "b": "b   INT"}},
		{"table constraints", "CREATE TABLE x (a INT, b INT, CONSTRAINT k UNIQUE (a, b), PRIMARY KEY (a), UNIQUE (b), CHECK (a > 0), FOREIGN KEY (b) REFERENCES y (id))",
			map[string]string{"a": "a INT", "b": "b INT"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := map[string]string{}
			for _, part := range sqliteTableBody(c.create) {
				name, ok := sqliteLeadingName(part)
				if !ok {
					t.Fatalf("no name in %q", part)
				}
				if isSQLiteTableConstraint(part, name) {
					continue
				}
				got[strings.ToLower(name)] = part
			}
			if diff := cmp.Diff(c.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
