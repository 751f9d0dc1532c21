package ddl

import "github.com/jobqueue/jobqueue/internal/engine"

// SideTable is a table that holds state beside a jobs table (SPEC section
// 8), named <jobs table>_<Suffix>. See the package doc for how to add one.
type SideTable struct {
	// Suffix names the table: <jobs table>_<Suffix>; lower case letters,
	// digits and underscores, at most MaxSideSuffix characters.
	Suffix string
	// Create returns the statements that create the side table side (on
	// side.Kind, its name quoted by side.Quoted()) and its indexes, in
	// order. Each must be idempotent; the first creates the table.
	Create func(side engine.Table) []string
}

// SideTables are the side tables every jobs table has, in creation order.
// Append new ones at the end (see the package doc).
func SideTables() []SideTable {
	return []SideTable{}
}

// Side is the side table with suffix of the jobs table t, on t's engine.
// t is checked (engine.ParseTable), so the name is too: its length is what
// TestNamesFit guards.
func Side(t engine.Table, suffix string) engine.Table {
	return engine.Table{Kind: t.Kind, Name: t.Name + "_" + suffix}
}
