package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/testdb"
)

// TestListEscapesControlCharacters: `jobqueue list` prints a job whose
// kind, type or error holds a newline, a tab or another control character
// on one line of its table, those characters escaped as Go quotes them
// (the text quoted, so that it is told apart from text that holds a
// backslash); they broke the table's lines and columns. --json gives the
// text as it is. (The table is the same on every engine: SQLite only.)
func TestListEscapesControlCharacters(t *testing.T) {
	t.Parallel()
	e := testdb.New(t, engine.SQLite)
	c := envCLI(t, e)
	c.ok(t, "install")
	tbl := parseTable(t, e.Kind, c.table)
	cases := []struct {
		name, typ, err string
		want           []string // what the job's line of the table holds
	}{
		{"plain", "default", "", []string{" plain ", " default "}},
		{"two\nlines", "default", "", []string{` "two\nlines" `}},
		{"k", "tab\there", "", []string{` "tab\there" `}},
		{"esc", "default", "red \x1b[31m", []string{` esc `, `"red \x1b[31m"`}},
		{"failed", "default", "first\nsecond\tthird", []string{`"first\nsecond\tthird"`}},
		{"back\\slash", "default", "", []string{` back\slash `}},
		{`"quoted"`, "default", "", []string{` "\"quoted\"" `}},
		// A status no jobqueue writes, which another program may have
		// (SQLite's column is VARCHAR): it was printed as it was.
		{"odd", "default", "", []string{` "pend\ning" `}},
	}
	for _, tc := range cases {
		id := strings.TrimSpace(c.ok(t, "enqueue", "--name", tc.name, "--type", tc.typ))
		if tc.err != "" {
			updateJobs(t, e, tbl, "error = ? WHERE id = ?", tc.err, id)
		}
		if tc.name == "odd" {
			updateJobs(t, e, tbl, "status = ? WHERE id = ?", "pend\ning", id)
		}
	}
	lines := strings.Split(strings.TrimSuffix(c.ok(t, "list"), "\n"), "\n")
	if len(lines) != len(cases)+1 {
		t.Fatalf("list printed %d lines for %d jobs: %q", len(lines), len(cases), lines)
	}
	for i, tc := range cases {
		line := lines[len(cases)-i] + " " // newest first
		for _, w := range tc.want {
			if !strings.Contains(line, w) {
				t.Errorf("job %q: line %q does not hold %q", tc.name, line, w)
			}
		}
	}
	var rows []jobJSON
	if err := json.Unmarshal([]byte(c.ok(t, "list", "--json")), &rows); err != nil {
		t.Fatal(err)
	}
	if len(rows) != len(cases) {
		t.Fatalf("list --json gave %d jobs, want %d", len(rows), len(cases))
	}
	for i, tc := range cases {
		r := rows[len(cases)-1-i]
		if r.Name != tc.name || r.Type != tc.typ || (r.Error == nil) != (tc.err == "") || r.Error != nil && *r.Error != tc.err {
			t.Errorf("list --json: job %+v; want name %q, type %q, error %q as they are", r, tc.name, tc.typ, tc.err)
		}
	}
}
