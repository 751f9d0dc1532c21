package ddl

import (
	"regexp"
	"strings"
	"testing"

	"github.com/jobqueue/jobqueue/internal/engine"
)

// longest is the longest table name engine k accepts.
func longest(t *testing.T, k engine.Kind) engine.Table {
	t.Helper()
	n := 56
	if k == engine.Postgres {
		n = 50
	}
	tb, err := engine.ParseTable(k, strings.Repeat("j", n))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := engine.ParseTable(k, strings.Repeat("j", n+1)); err == nil {
		t.Fatalf("%s accepts a %d-character table name; update this test's longest name", k, n+1)
	}
	return tb
}

var suffixRE = regexp.MustCompile(`^[a-z0-9_]+$`)

// TestNamesFit: with the longest table name each engine accepts, every
// name we create (tables, indexes, PostgreSQL's primary key constraints)
// fits the engine's identifier limit without being cut, except the jobs
// table's own index names on PostgreSQL, whose cut SPEC section 2 defines;
// and no two are the same.
func TestNamesFit(t *testing.T) {
	seenSuffix := map[string]bool{}
	for _, st := range SideTables() {
		if !suffixRE.MatchString(st.Suffix) || len(st.Suffix) > MaxSideSuffix {
			t.Errorf("side table suffix %q: want lower case letters, digits and underscores, at most %d", st.Suffix, MaxSideSuffix)
		}
		if seenSuffix[st.Suffix] {
			t.Errorf("side table suffix %q twice", st.Suffix)
		}
		seenSuffix[st.Suffix] = true
	}
	for _, k := range engine.Kinds() {
		t.Run(string(k), func(t *testing.T) {
			tb := longest(t, k)
			names := map[string]bool{}
			for _, o := range Objects(tb) {
				if o.Kind == SideStatement {
					continue // an index of a side table: named by IndexName, checked below
				}
				if names[o.Name] {
					t.Errorf("name %s twice", o.Name)
				}
				names[o.Name] = true
				limit := 64 // MySQL; SQLite has no limit, but keeps to MySQL's
				if k == engine.Postgres {
					limit = 63
				}
				if k == engine.SQLite && o.Kind == JobsIndex {
					continue // idx_<table>_<suffix>, uncut: SQLite takes any length
				}
				switch o.Kind {
				case JobsTable, SideTableKind:
					if k == engine.Postgres && len(o.Name+"_pkey") > limit {
						t.Errorf("%s %s: its primary key %s_pkey has more than %d bytes", o.Kind, o.Name, o.Name, limit)
					}
					fallthrough
				default:
					if len(o.Name) > limit {
						t.Errorf("%s %s has %d bytes, more than %d", o.Kind, o.Name, len(o.Name), limit)
					}
				}
			}
			for _, o := range Objects(tb) {
				prefix := IndexName(o.Table, "")
				if o.Kind != JobsTable && strings.Contains(strings.ToUpper(o.Create), " INDEX ") && !strings.Contains(o.Create, prefix) {
					t.Errorf("%s %s: an index not named with IndexName (%s…): %s", o.Kind, o.Name, prefix, o.Create)
				}
			}
		})
	}
}

// TestObjectsAreIdempotentAndComplete: every statement can run again
// (Install runs them on every deploy), the jobs table comes first with its
// four indexes (inside the CREATE TABLE on MySQL), every table has a drop
// statement, and MySQL tables get the table options.
func TestObjectsAreIdempotentAndComplete(t *testing.T) {
	for _, k := range engine.Kinds() {
		t.Run(string(k), func(t *testing.T) {
			tb, err := engine.ParseTable(k, "jobs")
			if err != nil {
				t.Fatal(err)
			}
			objs := Objects(tb)
			if objs[0].Kind != JobsTable || objs[0].Name != "jobs" || objs[0].Drop != "DROP TABLE IF EXISTS "+tb.Quoted() {
				t.Errorf("first object %+v; want the jobs table with its drop", objs[0])
			}
			var indexes int
			for _, o := range objs {
				if !strings.HasPrefix(o.Create, "CREATE ") || !strings.Contains(o.Create, " IF NOT EXISTS ") {
					t.Errorf("%s %s: not an idempotent CREATE … IF NOT EXISTS: %s", o.Kind, o.Name, o.Create)
				}
				switch o.Kind {
				case JobsIndex:
					indexes++
					if o.Drop != "" {
						t.Errorf("index %s has a drop statement; the table's drop removes it", o.Name)
					}
				case JobsTable, SideTableKind:
					if o.Drop != DropTable(o.Table) {
						t.Errorf("%s %s: drop %q", o.Kind, o.Name, o.Drop)
					}
					if k == engine.MySQL && !strings.HasSuffix(o.Create, MySQLTableOptions) {
						t.Errorf("MySQL table %s does not end with %s", o.Name, MySQLTableOptions)
					}
				}
			}
			if k == engine.MySQL {
				indexes = strings.Count(objs[0].Create, "\n    INDEX ")
			}
			if indexes != len(Indexes()) || indexes != 4 {
				t.Errorf("%d indexes of the jobs table; want the 4 of SPEC section 2", indexes)
			}
			if got, want := len(objs)-1-map[bool]int{true: 0, false: 4}[k == engine.MySQL], len(SideObjects(tb)); got != want {
				t.Errorf("%d objects after the jobs table and its indexes, want the %d side objects", got, want)
			}
		})
	}
}

func TestSideName(t *testing.T) {
	tb, err := engine.ParseTable(engine.Postgres, "Jobs")
	if err != nil {
		t.Fatal(err)
	}
	if got := Side(tb, "unique"); got != (engine.Table{Kind: engine.Postgres, Name: "jobs_unique"}) {
		t.Errorf("Side = %+v, want jobs_unique on postgres", got)
	}
}

// TestSideObjectsDeclareTheirColumns: every side table and view lists its
// columns (what Install and Uninstall tell it from another program's table
// by), in lower case, each once, and each is a word of the statement that
// creates it on every engine. (The migrations' catalog tests compare the
// list with the columns the engines report.)
func TestSideObjectsDeclareTheirColumns(t *testing.T) {
	for _, k := range engine.Kinds() {
		t.Run(string(k), func(t *testing.T) {
			tb, err := engine.ParseTable(k, "jobs")
			if err != nil {
				t.Fatal(err)
			}
			for _, o := range SideObjects(tb) {
				if o.Kind != SideTableKind && o.Kind != SideView {
					if o.Columns != nil {
						t.Errorf("%s %s lists columns %v; only side tables and views do", o.Kind, o.Name, o.Columns)
					}
					continue
				}
				if len(o.Columns) == 0 {
					t.Errorf("%s %s lists no columns", o.Kind, o.Name)
				}
				seen := map[string]bool{}
				for _, c := range o.Columns {
					if seen[c] || c != strings.ToLower(c) {
						t.Errorf("%s %s: column %q twice or not in lower case", o.Kind, o.Name, c)
					}
					seen[c] = true
					if !regexp.MustCompile(`\b` + regexp.QuoteMeta(c) + `\b`).MatchString(o.Create) {
						t.Errorf("%s %s: column %s is not in its statement:\n%s", o.Kind, o.Name, c, o.Create)
					}
				}
			}
		})
	}
}

// TestSideIndexesInCreate: every index a side table declares (which
// Install repairs) is built by its Create statements on every engine, with
// SideIndex.Create or, on MySQL, SideIndex.Clause.
func TestSideIndexesInCreate(t *testing.T) {
	for _, k := range engine.Kinds() {
		t.Run(string(k), func(t *testing.T) {
			tb, err := engine.ParseTable(k, "jobs")
			if err != nil {
				t.Fatal(err)
			}
			for _, st := range SideTables() {
				side := Side(tb, st.Suffix)
				all := strings.Join(st.Create(side), "\n")
				for _, ix := range st.Indexes {
					want := ix.Create(side)
					if k == engine.MySQL {
						want = ix.Clause(side)
					}
					if !strings.Contains(all, want) {
						t.Errorf("%s: index %s is not built as declared (%s):\n%s", side.Name, ix.Suffix, want, all)
					}
				}
			}
		})
	}
}
