package ddl

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/jobqueue/jobqueue/internal/engine"
)

var (
	// enumRE finds the jobs table's status column in a schema.sql: its
	// type up to the closing parenthesis of an ENUM.
	enumRE = regexp.MustCompile(`(?m)^\s*status\s+(ENUM\s*\([^)]*\))`)
	// checkRE finds a CHECK constraint listing statuses.
	checkRE = regexp.MustCompile(`(?i)CHECK\s*\(\s*status\s+IN\s*\(([^)]*)\)`)
	// literalRE finds a status compared with one literal in a query.
	literalRE = regexp.MustCompile(`(?i)\bstatus\s*(?:=|<>|!=)\s*'([^']*)'`)
	// inRE finds a status compared with a list of literals in a query.
	inRE = regexp.MustCompile(`(?i)\bstatus\s+(?:NOT\s+)?IN\s*\(\s*('[^)]*)\)`)
	// countRE finds one count of a CountStatuses… query: the status it
	// counts and the column it is returned as.
	countRE = regexp.MustCompile(`j\.status = '([^']*)' LIMIT [^)]*\) \w+\)(?:::bigint)? AS (\w+)`)
	// quotedRE finds the quoted words of a list.
	quotedRE = regexp.MustCompile(`'([^']*)'`)
)

// sqlFile is sql/<engine>/<name>.sql.
func sqlFile(t *testing.T, k engine.Kind, name string) string {
	t.Helper()
	b, err := os.ReadFile("../../sql/" + string(k) + "/" + name + ".sql")
	if err != nil {
		t.Fatalf("%v; the test reads the SQL files from internal/ddl, two levels below them", err)
	}
	return string(b)
}

// quoted is the quoted words of a SQL list such as 'a', 'b'.
func quoted(list string) []string {
	var out []string
	for _, m := range quotedRE.FindAllStringSubmatch(list, -1) {
		out = append(out, m[1])
	}
	return out
}

// TestStatusesInDDL: the MySQL ENUM of the status column, as Install
// creates it, lists Statuses in their order, once each.
func TestStatusesInDDL(t *testing.T) {
	want := Statuses()
	seen := map[string]bool{}
	for _, s := range want {
		if seen[s] || !regexp.MustCompile(`^[a-z_]{1,20}$`).MatchString(s) {
			t.Errorf("Statuses() = %v: %q is there twice or is no lower-case word of at most 20 letters (VARCHAR(20))", want, s)
		}
		seen[s] = true
	}
	for _, c := range Columns() {
		if c.Name != "status" {
			continue
		}
		m := enumRE.FindStringSubmatch("status " + c.MySQL)
		if m == nil {
			t.Fatalf("the MySQL status column %q has no ENUM", c.MySQL)
		}
		if got := quoted(m[1]); !slices.Equal(got, want) {
			t.Errorf("the MySQL status column lists %v, want Statuses() %v", got, want)
		}
		return
	}
	t.Fatal("Columns() has no status column")
}

// TestStatusesInSQL: what sql/<engine>/*.sql (which sqlc compiles, so
// that it cannot be derived from Statuses) spells out about statuses
// agrees with Statuses: the MySQL ENUM of schema.sql lists them in their
// order, a CHECK constraint on status (none today) too, every status a
// query compares with is one of them, and the CountStatuses… queries
// count each of them, in their order, as a column of its name.
func TestStatusesInSQL(t *testing.T) {
	want := Statuses()
	for _, k := range engine.Kinds() {
		t.Run(string(k), func(t *testing.T) {
			schema := sqlFile(t, k, "schema")
			if k == engine.MySQL {
				m := enumRE.FindStringSubmatch(schema)
				if m == nil {
					t.Fatal("sql/mysql/schema.sql: no status ENUM in the jobs table")
				}
				if got := quoted(m[1]); !slices.Equal(got, want) {
					t.Errorf("sql/mysql/schema.sql: the status ENUM lists %v, want Statuses() %v", got, want)
				}
			}
			for _, m := range checkRE.FindAllStringSubmatch(schema, -1) {
				if got := quoted(m[1]); !slices.Equal(got, want) {
					t.Errorf("sql/%s/schema.sql: CHECK (status IN …) lists %v, want Statuses() %v", k, got, want)
				}
			}

			queries := sqlFile(t, k, "queries")
			var used []string
			for _, m := range literalRE.FindAllStringSubmatch(queries, -1) {
				used = append(used, m[1])
			}
			for _, m := range inRE.FindAllStringSubmatch(queries, -1) {
				used = append(used, quoted(m[1])...)
			}
			if len(used) == 0 {
				t.Fatalf("sql/%s/queries.sql: no status compared with a literal; has the test's pattern gone stale?", k)
			}
			for _, s := range used {
				if !slices.Contains(want, s) {
					t.Errorf("sql/%s/queries.sql compares status with %q, which is not in Statuses() %v", k, s, want)
				}
			}

			blocks := strings.Split(queries, "-- name: ")
			var counting int
			for _, b := range blocks {
				if !strings.HasPrefix(b, "CountStatuses") {
					continue
				}
				counting++
				name, _, _ := strings.Cut(b, " ")
				var got []string
				for _, m := range countRE.FindAllStringSubmatch(b, -1) {
					if m[1] != m[2] {
						t.Errorf("sql/%s/queries.sql %s: the count of %q is returned as %s", k, name, m[1], m[2])
					}
					got = append(got, m[1])
				}
				if !slices.Equal(got, want) {
					t.Errorf("sql/%s/queries.sql %s counts %v, want Statuses() %v", k, name, got, want)
				}
			}
			if counting == 0 {
				t.Errorf("sql/%s/queries.sql: no CountStatuses… query; has the test's pattern gone stale?", k)
			}
		})
	}
}
