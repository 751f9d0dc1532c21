package migrations

import (
	"context"
	"strings"
	"testing"

	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/testdb"
)

// TestMigrateSQLiteKeepsTableConstraints: SQLite's migration rebuilds the
// table, and the table constraints the user added to the version 1 table
// (a UNIQUE, CHECK or FOREIGN KEY clause of its own after the columns,
// named or not) are kept, as on PostgreSQL and MySQL, where the table is
// left alone: after Migrate, an insert that breaks one is refused. One
// that names retry_count or locked_at, which version 2 drops, makes
// Migrate fail with an error naming it, the table left version 1 with its
// rows; a CHECK on status that does not allow 'expired' is dropped, as on
// PostgreSQL. The rebuild lost every table constraint.
func TestMigrateSQLiteKeepsTableConstraints(t *testing.T) {
	t.Parallel()
	insert := func(tb engine.Table, values string) string {
		return `INSERT INTO ` + tb.Quoted() + ` (name, payload, max_attempts, base_delay, max_delay, scheduled_at, created_at, tenant, code, owner_id)
VALUES ('send', '{}', 3, 60, 3600, '2026-01-02 03:04:05', '2026-01-01 00:00:00', ` + values + `)`
	}
	cases := []struct {
		name       string
		constraint string // a table constraint, with {owners} for the owners table
		refused    string // the values of an insert it refuses after Migrate
		wantErr    string // Migrate's error names this; "" for none
	}{
		{"unique", "UNIQUE (tenant, code)", "'acme', 'c1', 1", ""},
		{"named unique", "CONSTRAINT tenant_code UNIQUE (tenant, code)", "'acme', 'c1', 1", ""},
		{"check", "CHECK (tenant <> code)", "'x', 'x', 1", ""},
		{"named check", `CONSTRAINT "tenant, not code" CHECK (tenant <> code)`, "'x', 'x', 1", ""},
		{"foreign key", `FOREIGN KEY (owner_id) REFERENCES "{owners}" (id)`, "'acme', 'c2', 7", ""},
		{"on retry_count", "CONSTRAINT retries CHECK (retry_count >= 0)", "", "retries"},
		{"on locked_at", "UNIQUE (locked_at, tenant)", "", "UNIQUE (locked_at, tenant)"},
		{"version 1 statuses", "CHECK (status IN ('pending', 'in_progress', 'completed', 'failed'))", "", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			e := testdb.New(t, engine.SQLite)
			ctx := context.Background()
			name := e.Table(t)
			tb := tableOf(t, engine.SQLite, name)
			owners := e.Table(t)
			mustExec(t, e.DB, `CREATE TABLE "`+owners+`" (id INTEGER PRIMARY KEY)`, `INSERT INTO "`+owners+`" (id) VALUES (1)`)
			ddl := v1DDL(tb)
			if !strings.HasSuffix(ddl[0], ")") {
				t.Fatalf("v1DDL's CREATE TABLE does not end with ): %s", ddl[0])
			}
			ddl[0] = strings.TrimSuffix(ddl[0], ")") + ",\n  tenant TEXT, code TEXT, owner_id INTEGER,\n  " +
				strings.ReplaceAll(c.constraint, "{owners}", owners) + ")"
			mustExec(t, e.DB, ddl...)
			mustExec(t, e.DB, `INSERT INTO `+tb.Quoted()+` (name, payload, status, scheduled_at, created_at, tenant, code, owner_id)
VALUES ('send', '{}', 'pending', '2026-01-02 03:04:05', '2026-01-01 00:00:00', 'acme', 'c1', 1)`)
			before := imageOf(t, e.DB, tb)

			err := Migrate(ctx, e.DB, testPolicy, name)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) || !strings.Contains(err.Error(), "constraint") {
					t.Fatalf("Migrate = %v; want an error naming the constraint %s", err, c.wantErr)
				}
				before.checkSame(t, e.DB, tb, "the refused Migrate")
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if st, err := inspect(ctx, e.DB, tb); err != nil || st != tableV2 {
				t.Fatalf("after Migrate: %v (%v)", st, err)
			}
			if c.refused == "" {
				// The version 1 CHECK on status is gone: a job can expire.
				mustExec(t, e.DB, `UPDATE `+tb.Quoted()+` SET status = 'expired'`)
				return
			}
			conn, err := e.DB.Conn(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			if _, err := conn.ExecContext(ctx, "PRAGMA foreign_keys = ON"); err != nil {
				t.Fatal(err)
			}
			if _, err := conn.ExecContext(ctx, insert(tb, "'other', 'c9', 1")); err != nil {
				t.Errorf("the control insert: %v", err)
			}
			if _, err := conn.ExecContext(ctx, insert(tb, c.refused)); err == nil {
				t.Errorf("the table constraint %s was lost: the insert of (%s) was accepted", c.constraint, c.refused)
			}
		})
	}
}

// TestSQLiteConstraintKind: a table constraint's kind is read past its
// CONSTRAINT name, bare or quoted (a quoted name may hold a kind's word).
func TestSQLiteConstraintKind(t *testing.T) {
	t.Parallel()
	cases := []struct{ c, want string }{
		{"UNIQUE (a, b)", "UNIQUE"},
		{"check(a > 0)", "CHECK"},
		{"CONSTRAINT k PRIMARY KEY (id)", "PRIMARY"},
		{`CONSTRAINT "check, unique" FOREIGN KEY (a) REFERENCES b (id)`, "FOREIGN"},
		{"CONSTRAINT `x``y` CHECK (a)", "CHECK"},
		{"constraint [a b]\n\tunique (a)", "UNIQUE"},
		{"CONSTRAINT uniqueness CHECK (a)", "CHECK"},
		{"a INT", ""},
	}
	for _, c := range cases {
		if got := sqliteConstraintKind(c.c); got != c.want {
			t.Errorf("sqliteConstraintKind(%q) = %q, want %q", c.c, got, c.want)
		}
	}
}
