package migrations

import (
	"context"
	"strings"
	"testing"

	"github.com/jobqueue/jobqueue/internal/ddl"
	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/testdb"
)

// TestGooseUpRefusesTakenSideNames runs the goose command over the file
// GooseSQL writes on a database where the name of one of the table's side
// objects is held by something else: `goose up` fails with the message
// that names it and creates nothing (the jobs table stays missing), and
// the other table keeps its row. Where the side tables are jobqueue's own
// (Install ran first), `goose up` goes through.
func TestGooseUpRefusesTakenSideNames(t *testing.T) {
	t.Parallel()
	testdb.ForEachEngine(t, func(t *testing.T, e *testdb.Env) {
		ctx := context.Background()
		type sideCase struct {
			name string
			// hold puts something else under o's name.
			hold func(t *testing.T, tb engine.Table, o ddl.Object)
			ok   bool
		}
		userTable := func(t *testing.T, _ engine.Table, o ddl.Object) {
			for _, s := range []string{"CREATE TABLE " + o.Table.Quoted() + " (x INTEGER)", "INSERT INTO " + o.Table.Quoted() + " (x) VALUES (7)"} {
				if _, err := e.DB.ExecContext(ctx, s); err != nil {
					t.Fatalf("%s: %v", s, err)
				}
			}
		}
		cases := []sideCase{{name: "installed", ok: true,
			hold: func(t *testing.T, tb engine.Table, _ ddl.Object) {
				if err := Install(ctx, e.DB, tb.Name); err != nil {
					t.Fatal(err)
				}
			}}}
		probe := tableOf(t, e.Kind, "jobs")
		for _, o := range ddl.SideObjects(probe) {
			if o.Kind != ddl.SideTableKind && o.Kind != ddl.SideView {
				continue
			}
			suffix := strings.TrimPrefix(o.Name, "jobs")
			cases = append(cases, sideCase{name: "user table as" + suffix, hold: userTable})
		}
		cases = append(cases, sideCase{name: "other queue as _unique",
			hold: func(t *testing.T, tb engine.Table, _ ddl.Object) {
				t.Cleanup(func() { testdb.Drop(t, e.DB, tb.Name+"_unique") })
				if err := Install(ctx, e.DB, tb.Name+"_unique"); err != nil {
					t.Fatal(err)
				}
			}})
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				name := e.Table(t)
				tb := tableOf(t, e.Kind, name)
				var held ddl.Object
				for _, o := range ddl.SideObjects(tb) {
					if (o.Kind == ddl.SideTableKind || o.Kind == ddl.SideView) && strings.HasSuffix(c.name, strings.TrimPrefix(o.Name, name)) {
						held = o
					}
				}
				c.hold(t, tb, held)
				dir, versionTable := gooseDirFor(t, e, name)
				out, err := gooseCommandOutput(t, e, dir, versionTable, "up")
				if c.ok {
					if err != nil {
						t.Fatalf("goose up over jobqueue's own side tables: %v\n%s", err, out)
					}
					return
				}
				if err == nil {
					t.Fatalf("goose up went through with %s held by another table:\n%s", held.Name, out)
				}
				if !strings.Contains(out, sideTakenMessage(held)) {
					t.Errorf("goose up's output does not say %q:\n%s", sideTakenMessage(held), out)
				}
				if st, err := inspect(ctx, e.DB, tb); err != nil || st != tableMissing {
					t.Errorf("after the failed goose up, table %s is %v (%v); want it missing", name, st, err)
				}
				if c.name != "other queue as _unique" {
					if got := testdb.Strings(t, e.DB, "SELECT x FROM "+held.Table.Quoted()); len(got) != 1 || got[0] != "7" {
						t.Errorf("the other table %s holds %v after goose up, want [7]", held.Name, got)
					}
				}
			})
		}
	})
}

// TestGooseSideMessageFits: the message of a side check, of the check
// of the jobs table itself (tableNotV2Message) and, on MySQL, of an index
// check (wrongIndexMessage), has no quote or
// comma (MySQL cuts the value it shows at a comma) and fits the 200
// characters MySQL shows, for the longest table name each engine takes.
func TestGooseSideMessageFits(t *testing.T) {
	for _, k := range engine.Kinds() {
		name := strings.Repeat("j", 60)
		var tb engine.Table
		for ; ; name = name[1:] {
			var err error
			if tb, err = engine.ParseTable(k, name); err == nil {
				break
			}
		}
		if msg := tableNotV2Message(tb); len(msg) > 200 || strings.ContainsAny(msg, `,'"`) {
			t.Errorf("%s: the message for table %s (%d characters) is longer than 200 or has a quote or comma: %s", k, tb.Name, len(msg), msg)
		}
		if k == engine.MySQL {
			for _, ix := range []string{tb.IndexName("type_status_scheduled"), tb.IndexName("status_scheduled")} {
				if msg := wrongIndexMessage(tb, tb, ix); len(msg) > 200 || strings.ContainsAny(msg, `,'"`) {
					t.Errorf("%s: the message for index %s (%d characters) is longer than 200 or has a quote or comma: %s", k, ix, len(msg), msg)
				}
			}
			side := ddl.Side(tb, "unique")
			if msg := wrongIndexMessage(tb, side, ddl.IndexName(side, "live_key")); len(msg) > 200 || strings.ContainsAny(msg, `,'"`) {
				t.Errorf("%s: the message for the side index (%d characters) is longer than 200 or has a quote or comma: %s", k, len(msg), msg)
			}
		}
		for _, o := range ddl.SideObjects(tb) {
			if o.Kind != ddl.SideTableKind && o.Kind != ddl.SideView {
				continue
			}
			msg := sideTakenMessage(o)
			if len(msg) > 200 || strings.ContainsAny(msg, `,'"`) {
				t.Errorf("%s: the message for %s (%d characters) is longer than 200 or has a quote or comma: %s", k, o.Name, len(msg), msg)
			}
		}
	}
}

// TestGooseUpRefusesTakenIndexNames: on PostgreSQL and SQLite, where index
// names are per schema, the goose file of X fails `goose up`, creating
// nothing, when another table holds one of X's index names (X_type holds
// idx_X_type_status_scheduled); it went through, X left without that
// index (CREATE INDEX IF NOT EXISTS found the other table's).
func TestGooseUpRefusesTakenIndexNames(t *testing.T) {
	t.Parallel()
	testdb.ForEachEngine(t, func(t *testing.T, e *testdb.Env) {
		if e.Kind == engine.MySQL {
			return // index names are per table there
		}
		ctx := context.Background()
		name := e.Table(t)
		tb := tableOf(t, e.Kind, name)
		other := name + "_type"
		t.Cleanup(func() { testdb.Drop(t, e.DB, other) })
		if err := Install(ctx, e.DB, other); err != nil {
			t.Fatal(err)
		}
		dir, versionTable := gooseDirFor(t, e, name)
		out, err := gooseCommandOutput(t, e, dir, versionTable, "up")
		if err == nil {
			t.Fatalf("goose up went through with %s's index name held by %s:\n%s", name, other, out)
		}
		if want := "jobqueue: the index name " + tb.IndexName("type_status_scheduled"); !strings.Contains(out, want) || !strings.Contains(out, "choose another table name") {
			t.Errorf("goose up's output does not say %q and to choose another table name:\n%s", want, out)
		}
		if st, err := inspect(ctx, e.DB, tb); err != nil || st != tableMissing {
			t.Errorf("after the failed goose up, table %s is %v (%v); want it missing", name, st, err)
		}
		if err := Check(ctx, e.DB, other); err != nil {
			t.Errorf("Check(%q): %v", other, err)
		}
	})
}
