package migrations

import (
	"context"
	"strings"
	"testing"

	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/testdb"
)

// TestMigrateMySQLTimeColumnTypes: a version 1 MySQL table whose time
// columns are not the types SPEC section 4 gives them (created_at
// TIMESTAMP, the others DATETIME) but another of the two, or one with
// fractional seconds, is converted whole: each time column ends a
// DATETIME holding the same UTC time (to the second, as version 2 keeps
// it), and the table is version 2. A time column of a type that is no
// time (VARCHAR, BIGINT, DATE) is refused before anything changes, with
// an error naming the column and its type. With created_at DATETIME(6) or
// TIMESTAMP(6) the migration converted the rows, dropped retry_count and
// locked_at, then failed ("still partly migrated"), and every run after
// it failed the same way: the table was left half-migrated for good.
func TestMigrateMySQLTimeColumnTypes(t *testing.T) {
	t.Parallel()
	const (
		created   = "created_at TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP"
		scheduled = "scheduled_at DATETIME NOT NULL"
		expires   = "expires_at DATETIME NULL"
	)
	cases := []struct {
		name     string
		col      string // the column's v1 definition replaced
		def      string // by this one
		wantErr  string // Migrate's error names this; "" for none
		refusing bool
	}{
		{"created_at datetime(6)", created, "created_at DATETIME(6) NOT NULL", "", false},
		{"created_at timestamp(6)", created, "created_at TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6)", "", false},
		{"created_at datetime", created, "created_at DATETIME NOT NULL", "", false},
		{"scheduled_at datetime(6)", scheduled, "scheduled_at DATETIME(6) NOT NULL", "", false},
		{"scheduled_at timestamp(3)", scheduled, "scheduled_at TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3)", "", false},
		{"expires_at timestamp", expires, "expires_at TIMESTAMP NULL", "", false},
		{"created_at varchar", created, "created_at VARCHAR(32) NOT NULL", "created_at", true},
		{"scheduled_at bigint", scheduled, "scheduled_at BIGINT NOT NULL", "scheduled_at", true},
		{"expires_at date", expires, "expires_at DATE NULL", "expires_at", true},
	}
	e := testdb.New(t, engine.MySQL)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			name := e.Table(t)
			tb := tableOf(t, engine.MySQL, name)
			ddl := v1DDL(tb)
			if !strings.Contains(ddl[0], c.col) {
				t.Fatalf("v1DDL has no %q", c.col)
			}
			ddl[0] = strings.Replace(ddl[0], c.col, c.def, 1)
			mustExec(t, e.DB, ddl...)
			times := map[string]string{"scheduled_at": "'2026-01-02 03:04:05.4'", "expires_at": "'2026-03-04 05:06:07.4'", "created_at": "'2026-01-01 00:00:00.4'"}
			if c.refusing {
				times[strings.Fields(c.def)[0]] = "'20260101'"
			}
			mustExec(t, e.DB, `INSERT INTO `+tb.Quoted()+` (name, payload, status, scheduled_at, expires_at, created_at)
VALUES ('send', '{}', 'pending', `+times["scheduled_at"]+`, `+times["expires_at"]+`, `+times["created_at"]+`)`)
			before := imageOf(t, e.DB, tb)

			err := Migrate(ctx, e.DB, testPolicy, name)
			if c.refusing {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) || !strings.Contains(strings.ToLower(err.Error()), strings.ToLower(strings.Fields(c.def)[1])) {
					t.Fatalf("Migrate = %v; want an error naming %s and its type", err, c.wantErr)
				}
				before.checkSame(t, e.DB, tb, "the refused Migrate")
				return
			}
			if err != nil {
				t.Fatalf("Migrate: %v", err)
			}
			if st, err := inspect(ctx, e.DB, tb); err != nil || st != tableV2 {
				t.Fatalf("after Migrate: %v (%v); want version 2", st, err)
			}
			cols, err := columns(ctx, e.DB, tb)
			if err != nil {
				t.Fatal(err)
			}
			for _, col := range []string{"scheduled_at", "expires_at", "created_at"} {
				if typ := cols[col].Type; typ != "datetime" {
					t.Errorf("%s is %s; want datetime", col, typ)
				}
			}
			got := testdb.Strings(t, e.DB, `SELECT CONCAT(CAST(scheduled_at AS CHAR), ' ', CAST(expires_at AS CHAR), ' ', CAST(created_at AS CHAR)) FROM `+tb.Quoted())
			if want := "2026-01-02 03:04:05 2026-03-04 05:06:07 2026-01-01 00:00:00"; len(got) != 1 || got[0] != want {
				t.Errorf("times %v; want [%s]", got, want)
			}
		})
	}
}

// TestMigrateMySQLCompletesFractionalCreatedAt: a table that an earlier
// release's migration left with every version 2 column and row converted
// but created_at a DATETIME(6) (it converted only a plain TIMESTAMP, then
// failed "still partly migrated", on every run) is completed by Migrate:
// created_at becomes a DATETIME and the table version 2, its row kept.
func TestMigrateMySQLCompletesFractionalCreatedAt(t *testing.T) {
	t.Parallel()
	e := testdb.New(t, engine.MySQL)
	ctx := context.Background()
	name := e.Table(t)
	tb := tableOf(t, engine.MySQL, name)
	if err := Install(ctx, e.DB, name); err != nil {
		t.Fatal(err)
	}
	mustExec(t, e.DB, v2Row(tb), "ALTER TABLE "+tb.Quoted()+" MODIFY COLUMN created_at DATETIME(6) NOT NULL")
	if st, err := inspect(ctx, e.DB, tb); err != nil || st != tablePartial {
		t.Fatalf("before: %v (%v); want partly migrated", st, err)
	}
	if err := Migrate(ctx, e.DB, testPolicy, name); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	if st, err := inspect(ctx, e.DB, tb); err != nil || st != tableV2 {
		t.Fatalf("after Migrate: %v (%v); want version 2", st, err)
	}
	got := testdb.Strings(t, e.DB, `SELECT CONCAT(name, ' ', CAST(created_at AS CHAR)) FROM `+tb.Quoted())
	if want := "send 2026-01-01 00:00:00"; len(got) != 1 || got[0] != want {
		t.Errorf("rows %v; want [%s]", got, want)
	}
}
