package main

import (
	"strings"
	"testing"
	"unicode"

	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/testdb"
)

// TestShowEscapesControlCharacters: `jobqueue show ID` prints each field
// on one line of its own, a text with a newline, a tab, an ANSI escape or
// another character that is not printable quoted as `list` quotes it
// (tableCell); a pretty-printed payload is printed compacted. The error's
// newlines made lines that looked like fields of their own, and an escape
// sequence in it (or in the kind or type) reached the terminal as is.
func TestShowEscapesControlCharacters(t *testing.T) {
	t.Parallel()
	fields := []string{"id", "name", "type", "status", "attempts", "scheduled_at", "expires_at", "lease_until", "finished_at", "created_at", "error", "payload"}
	cases := []struct {
		name, typ, payload, err string
		want                    map[string]string // field → what its line holds
	}{
		{"plain", "default", `{"a":1}`, "boom", map[string]string{"name": " plain", "error": " boom", "payload": `{"a":1}`}},
		{"two\nlines", "tab\there", `{}`, "", map[string]string{"name": `"two\nlines"`, "type": `"tab\there"`}},
		{"esc", "default", `{}`, "red \x1b[31malert\x1b[0m\nsecond line\tcolumn", map[string]string{"error": `"red \x1b[31malert\x1b[0m\nsecond line\tcolumn"`}},
		{"bidi", "default", `{"to":"a` + "\u202e" + `b"}`, "", map[string]string{"payload": `"{\"to\":\"a\u202eb\"}"`}},
		{"pretty", "default", "{\n  \"a\": [\n    1\n  ]\n}\n", "", map[string]string{"payload": `{"a":[1]}`}},
	}
	testdb.ForEachEngine(t, func(t *testing.T, e *testdb.Env) {
		c := envCLI(t, e)
		c.ok(t, "install")
		tbl := parseTable(t, e.Kind, c.table)
		for _, tc := range cases {
			t.Run(strings.ReplaceAll(tc.name, "\n", " "), func(t *testing.T) {
				in := c
				in.stdin = tc.payload
				id := strings.TrimSpace(in.ok(t, "enqueue", "--name", tc.name, "--type", tc.typ, "--payload", "-"))
				if tc.err != "" {
					updateJobs(t, e, tbl, "error = "+placeholder(e.Kind, 1)+" WHERE id = "+placeholder(e.Kind, 2), tc.err, id)
				}
				out := c.ok(t, "show", id)
				lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
				if len(lines) != len(fields) {
					t.Fatalf("show printed %d lines, want one per field (%d): %q", len(lines), len(fields), out)
				}
				got := map[string]string{}
				for i, line := range lines {
					if !strings.HasPrefix(line, fields[i]+" ") {
						t.Errorf("line %d is %q; want the field %s", i+1, line, fields[i])
					}
					if j := strings.IndexFunc(line, func(r rune) bool { return !unicode.IsPrint(r) }); j >= 0 {
						t.Errorf("line %q holds the character %q, not printable", line, line[j:j+1])
					}
					got[fields[i]] = strings.TrimPrefix(line, fields[i])
				}
				for field, w := range tc.want {
					if !strings.Contains(got[field], w) {
						t.Errorf("the %s line is %q; want it to hold %q", field, got[field], w)
					}
				}
			})
		}
	})
}

// TestShowErrorNoneAndDash: `show` prints no error as an empty field, as
// `list` leaves its ERROR column empty, so that an error whose text is "-"
// is told apart from none. show printed "-" for both.
func TestShowErrorNoneAndDash(t *testing.T) {
	t.Parallel()
	e := testdb.New(t, engine.SQLite)
	c := envCLI(t, e)
	c.ok(t, "install")
	tbl := parseTable(t, e.Kind, c.table)
	cases := []struct {
		name string
		err  *string // the error column; nil: NULL
		want string  // the error field of show and list, spaces trimmed
	}{
		{"no error", nil, ""},
		{"dash", ptr("-"), "-"},
		{"text", ptr("boom"), "boom"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			id := strings.TrimSpace(c.ok(t, "enqueue", "--name", "k", "--type", "t_"+strings.ReplaceAll(tc.name, " ", "_")))
			if tc.err != nil {
				updateJobs(t, e, tbl, "error = ? WHERE id = ?", *tc.err, id)
			}
			var shown string
			for _, line := range strings.Split(c.ok(t, "show", id), "\n") {
				if rest, ok := strings.CutPrefix(line, "error "); ok || line == "error" {
					shown = strings.TrimSpace(rest)
				}
			}
			if shown != tc.want {
				t.Errorf("show: the error field is %q, want %q", shown, tc.want)
			}
			lines := strings.Split(strings.TrimSpace(c.ok(t, "list", "--type", "t_"+strings.ReplaceAll(tc.name, " ", "_"))), "\n")
			if len(lines) != 2 {
				t.Fatalf("list printed %q, want a header and one job", lines)
			}
			col := strings.Index(lines[0], "ERROR")
			listed := ""
			if col < len(lines[1]) {
				listed = strings.TrimSpace(lines[1][col:])
			}
			if listed != tc.want {
				t.Errorf("list: the ERROR column holds %q, want %q", listed, tc.want)
			}
		})
	}
}

// ptr is a pointer to s.
func ptr(s string) *string { return &s }
