package migrations

// The definitions of the user's own columns of a version 1 SQLite table,
// and its table constraints, read from the table's CREATE TABLE statement,
// so that SQLite's rebuild keeps each column whole and the constraints:
// pragma table_info tells only a column's type, NOT NULL and default, not
// its CHECK, COLLATE, UNIQUE or REFERENCES, nor the table's constraints.

import (
	"context"
	"fmt"
	"regexp"
	"strings"

	"github.com/jobqueue/jobqueue/internal/engine"
)

// sqliteColumnDefs returns the column definitions of the SQLite table t as
// its CREATE TABLE statement in sqlite_master spells them (ALTER TABLE …
// ADD COLUMN writes the added column's definition there too), keyed by the
// column's name in lower case, and its table constraints (CONSTRAINT,
// PRIMARY KEY, UNIQUE, CHECK, FOREIGN KEY clauses after the columns), in
// their order, as the statement spells them.
func sqliteColumnDefs(ctx context.Context, ex execQueryer, t engine.Table) (defs map[string]string, constraints []string, err error) {
	var create string
	found, err := queryOne(ctx, ex, []any{&create}, `SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ? COLLATE NOCASE`, t.Name)
	if err != nil {
		return nil, nil, fmt.Errorf("read the CREATE TABLE statement of table %s: %w", t.Name, err)
	}
	if !found {
		return nil, nil, fmt.Errorf("table %s has no CREATE TABLE statement in sqlite_master", t.Name)
	}
	defs = map[string]string{}
	for _, part := range sqliteTableBody(create) {
		name, ok := sqliteLeadingName(part)
		if !ok {
			continue
		}
		if isSQLiteTableConstraint(part, name) {
			constraints = append(constraints, part)
		} else {
			defs[strings.ToLower(name)] = part
		}
	}
	return defs, constraints, nil
}

// sqliteConstraintRE matches the start of a table constraint: an optional
// CONSTRAINT name, then the constraint's kind (group 2).
var sqliteConstraintRE = regexp.MustCompile("(?is)^(CONSTRAINT\\s*(\"(?:[^\"]|\"\")*\"|`(?:[^`]|``)*`|\\[[^\\]]*\\]|[^\\s\"`\\[(]+)\\s*)?(PRIMARY|UNIQUE|CHECK|FOREIGN)\\b")

// sqliteConstraintKind is the kind of the table constraint c in upper
// case (PRIMARY, UNIQUE, CHECK or FOREIGN), past its CONSTRAINT name; ""
// when it is none of them.
func sqliteConstraintKind(c string) string {
	m := sqliteConstraintRE.FindStringSubmatch(strings.TrimSpace(c))
	if m == nil {
		return ""
	}
	return strings.ToUpper(m[3])
}

// sqliteKeptConstraints returns the table constraints of the version 1
// SQLite table t (constraints, as sqliteColumnDefs returns them) that its
// version 2 rebuild keeps: all of them, but a CHECK on status that does
// not allow 'expired' (PostgreSQL's migration drops it too: it would
// refuse the new status) and a PRIMARY KEY on id alone (the version 2
// table declares it). A constraint that names retry_count or locked_at,
// which version 2 drops, or a primary key on other columns, is refused
// with an error naming it, before anything is changed.
func sqliteKeptConstraints(t engine.Table, constraints []string) ([]string, error) {
	var kept []string
	for _, c := range constraints {
		ids := sqliteIdentifiers(c)
		for _, col := range v1OnlyColumns {
			if ids[col] {
				return nil, fmt.Errorf("table %s has the table constraint %q, which uses %s; version 2 has no %s, and SQLite's migration, which rebuilds the table, cannot keep the constraint: rebuild the table without it (or change it not to use %s), migrate, then add what version 2 needs; nothing was changed",
					t.Name, c, col, col, col)
			}
		}
		switch sqliteConstraintKind(c) {
		case "CHECK":
			if ids["status"] && !strings.Contains(strings.ToLower(c), "'expired'") {
				continue
			}
		case "PRIMARY":
			if i := strings.Index(c, "("); i < 0 || !ids["id"] || len(sqliteIdentifiers(c[i:])) != 1 {
				return nil, fmt.Errorf("table %s has the table constraint %q: a version 2 table's primary key is id, and SQLite's migration, which rebuilds the table, cannot keep another; rebuild the table without it, then migrate; nothing was changed", t.Name, c)
			}
			continue
		}
		kept = append(kept, c)
	}
	return kept, nil
}

// sqliteTableBody splits the part of a CREATE TABLE statement between its
// first "(" and the matching ")" at its top-level commas, each part
// trimmed and without comments. String literals, quoted names and
// parentheses are skipped over, so a comma inside them splits nothing.
func sqliteTableBody(create string) []string {
	var parts []string
	var cur strings.Builder
	depth := 0
	for i := 0; i < len(create); i++ {
		c := create[i]
		switch {
		case c == '-' && i+1 < len(create) && create[i+1] == '-':
			for i < len(create) && create[i] != '\n' {
				i++
			}
			if depth > 0 {
				cur.WriteByte(' ')
			}
			continue
		case c == '/' && i+1 < len(create) && create[i+1] == '*':
			end := strings.Index(create[i+2:], "*/")
			if end < 0 {
				i = len(create)
			} else {
				i += 2 + end + 1
			}
			if depth > 0 {
				cur.WriteByte(' ')
			}
			continue
		case c == '\'' || c == '"' || c == '`' || c == '[':
			end := byte(c)
			if c == '[' {
				end = ']'
			}
			j := i + 1
			for j < len(create) {
				if create[j] == end {
					if end != ']' && j+1 < len(create) && create[j+1] == end {
						j += 2 // a doubled quote inside
						continue
					}
					break
				}
				j++
			}
			if depth > 0 {
				cur.WriteString(create[i:min(j+1, len(create))])
			}
			i = j
			continue
		case c == '(':
			depth++
			if depth == 1 {
				continue
			}
		case c == ')':
			depth--
			if depth == 0 {
				if s := strings.TrimSpace(cur.String()); s != "" {
					parts = append(parts, s)
				}
				return parts
			}
		case c == ',' && depth == 1:
			parts = append(parts, strings.TrimSpace(cur.String()))
			cur.Reset()
			continue
		}
		if depth > 0 {
			cur.WriteByte(c)
		}
	}
	return parts
}

// sqliteLeadingName is the name a column definition starts with, unquoted
// ("x", `x`, [x] or a bare word); ok is false for an empty definition.
func sqliteLeadingName(def string) (name string, ok bool) {
	def = strings.TrimSpace(def)
	if def == "" {
		return "", false
	}
	switch q := def[0]; q {
	case '"', '`', '[':
		end := q
		if q == '[' {
			end = ']'
		}
		var b strings.Builder
		for j := 1; j < len(def); j++ {
			if def[j] != end {
				b.WriteByte(def[j])
				continue
			}
			if end != ']' && j+1 < len(def) && def[j+1] == end {
				b.WriteByte(end)
				j++
				continue
			}
			return b.String(), true
		}
		return "", false
	}
	if i := strings.IndexAny(def, " \t\r\n("); i >= 0 {
		return def[:i], true
	}
	return def, true
}

// isSQLiteTableConstraint reports whether the part of a CREATE TABLE body
// starting with the word name is a table constraint rather than a column:
// it starts with CONSTRAINT, PRIMARY, UNIQUE, CHECK or FOREIGN, unquoted.
func isSQLiteTableConstraint(part, name string) bool {
	if strings.ContainsRune("\"`[", rune(part[0])) {
		return false // a quoted column name
	}
	switch strings.ToUpper(name) {
	case "CONSTRAINT", "PRIMARY", "UNIQUE", "CHECK", "FOREIGN":
		return true
	}
	return false
}
