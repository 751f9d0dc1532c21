package ddl

import (
	"github.com/jobqueue/jobqueue/internal/engine"
)

// ObjectKind tells what an Object is.
type ObjectKind string

// The kinds of objects a jobqueue table consists of.
const (
	JobsTable     ObjectKind = "table"
	JobsIndex     ObjectKind = "index"
	SideTableKind ObjectKind = "side table"
	SideStatement ObjectKind = "side table statement"
	SideView      ObjectKind = "side view"
)

// Object is one step in creating a jobqueue table: a statement that creates
// something, and the statement that drops it ("" when dropping the table
// it belongs to drops it too).
type Object struct {
	Kind ObjectKind
	// Table is the table the object is or belongs to.
	Table engine.Table
	// Name is the object's name as the engine stores it (the table's or
	// the index's).
	Name string
	// Create creates the object; it is idempotent (IF NOT EXISTS).
	Create string
	// Drop drops it if it exists, or is "" (see Object).
	Drop string
	// Columns, for a SideTableKind or SideView object, are the names of
	// its columns (SideTable.Columns, View.Columns): what tells it from
	// another table or view of the same name. Nil for other kinds.
	Columns []string
}

// Objects is everything a fresh install of the jobs table t creates, in
// creation order: the table (on MySQL with its four indexes inside), the
// four indexes (PostgreSQL and SQLite), then every side table with its
// statements. Dropping the objects in reverse order removes it all.
func Objects(t engine.Table) []Object {
	out := []Object{{Kind: JobsTable, Table: t, Name: t.Name, Create: CreateTable(t, true), Drop: DropTable(t)}}
	if t.Kind != engine.MySQL {
		for _, ix := range Indexes() {
			out = append(out, Object{Kind: JobsIndex, Table: t, Name: t.IndexName(ix.Suffix), Create: CreateIndex(t, ix)})
		}
	}
	return append(out, SideObjects(t)...)
}

// SideObjects is the part of Objects that creates t's side tables: what
// Install runs on every call, after the jobs table and its indexes are
// right.
func SideObjects(t engine.Table) []Object {
	var out []Object
	for _, st := range SideTables() {
		side := Side(t, st.Suffix)
		for i, s := range st.Create(side) {
			o := Object{Kind: SideStatement, Table: side, Name: side.Name, Create: s}
			if i == 0 {
				o.Kind, o.Drop, o.Columns = SideTableKind, DropTable(side), st.Columns
			}
			out = append(out, o)
		}
		if st.Views == nil {
			continue
		}
		for _, v := range st.Views(t) {
			view := Side(t, v.Suffix)
			for i, s := range v.Create {
				o := Object{Kind: SideStatement, Table: view, Name: view.Name, Create: s}
				if i == 0 {
					o.Kind, o.Drop, o.Columns = SideView, "DROP VIEW IF EXISTS "+view.Quoted(), v.Columns
				}
				out = append(out, o)
			}
		}
	}
	return out
}
