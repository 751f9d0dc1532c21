package queue

import (
	"context"
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/jobqueue/jobqueue/internal/engine"
)

func TestRewriteTable(t *testing.T) {
	all := engine.Kinds()
	pg, my, lite := []engine.Kind{engine.Postgres}, []engine.Kind{engine.MySQL}, []engine.Kind{engine.SQLite}
	cases := []struct {
		name  string
		kinds []engine.Kind
		in    string
		want  string // "" for an error
		n     int
	}{
		{"where", all, "SELECT * FROM jobs WHERE id = $1", `SELECT * FROM "t" WHERE id = $1`, 1},
		{"subquery", all, "UPDATE jobs SET x = 1 WHERE id IN (SELECT j.id FROM jobs j)", `UPDATE "t" SET x = 1 WHERE id IN (SELECT j.id FROM "t" j)`, 2},
		{"qualified column", all, "SELECT jobs.id FROM jobs", `SELECT "t".id FROM "t"`, 2},
		{"literal", all, "INSERT INTO jobs(name) VALUES ('jobs')", `INSERT INTO "t"(name) VALUES ('jobs')`, 1},
		{"doubled quote and upper case", all, "SELECT 'it''s jobs' FROM JOBS", `SELECT 'it''s jobs' FROM "t"`, 1},
		{"double-quoted", all, `SELECT "jobs" FROM jobs`, `SELECT "jobs" FROM "t"`, 1},
		{"doubled double quote", all, `SELECT "a""jobs" FROM jobs`, `SELECT "a""jobs" FROM "t"`, 1},
		{"line comment", all, "-- jobs\nSELECT * FROM jobs", "-- jobs\nSELECT * FROM \"t\"", 1},
		{"block comment", all, "SELECT /* jobs */ x FROM jobs", `SELECT /* jobs */ x FROM "t"`, 1},
		{"longer words", all, "SELECT myjobs, jobs_x, x_jobs, jobs2, $jobs FROM jobs;", `SELECT myjobs, jobs_x, x_jobs, jobs2, $jobs FROM "t";`, 1},
		{"delete", all, "DELETE FROM jobs", `DELETE FROM "t"`, 1},
		{"listen", pg, "LISTEN jobs;", `LISTEN "t";`, 1},

		{"unterminated literal", all, "SELECT 'unterminated jobs", "", 0},
		{"unterminated identifier", all, `SELECT "jobs FROM jobs`, "", 0},
		{"unterminated comment", all, "SELECT 1 FROM jobs /* jobs", "", 0},
		{"no table", all, "SELECT 1", "", 0},
		{"table only in a literal", all, "SELECT 'jobs'", "", 0},
		{"a longer name is not the table", all, "SELECT * FROM jobs_archive", "", 0},
		{"side table", all, "DELETE FROM jobs_unique WHERE job_id IN (SELECT j.id FROM jobs j)", `DELETE FROM "t_unique" WHERE job_id IN (SELECT j.id FROM "t" j)`, 2},
		{"side table only", all, "SELECT job_id FROM jobs_unique", `SELECT job_id FROM "t_unique"`, 1},
		{"marked as naming no table", all, "SELECT /* jobqueue:no-table */ 1", "SELECT /* jobqueue:no-table */ 1", 0},
		{"marked but naming the table", all, "SELECT /* jobqueue:no-table */ 1 FROM jobs", "", 0},
		{"mark inside a literal", all, "SELECT '/* jobqueue:no-table */'", "", 0},

		// Backslashes: escapes in MySQL literals, plain bytes in
		// PostgreSQL's standard strings and SQLite's.
		{"backslash escape", my, `SELECT 'a\'jobs' FROM jobs`, `SELECT 'a\'jobs' FROM "t"`, 1},
		{"backslash escape in double quotes", my, `SELECT "a\"jobs" FROM jobs`, `SELECT "a\"jobs" FROM "t"`, 1},
		{"backslash ends no literal", my, `SELECT '\\' FROM jobs`, `SELECT '\\' FROM "t"`, 1},
		{"backslash is a byte", pg, `SELECT 'a\' FROM jobs`, `SELECT 'a\' FROM "t"`, 1},
		{"backslash is a byte", lite, `SELECT 'a\' FROM jobs`, `SELECT 'a\' FROM "t"`, 1},
		{"standard string then stray quote", pg, `SELECT 'a\'jobs' FROM jobs`, "", 0},
		{"escape string", pg, `SELECT E'a\'jobs' FROM jobs`, `SELECT E'a\'jobs' FROM "t"`, 1},
		{"lower-case escape string", pg, `SELECT e'\\' FROM jobs`, `SELECT e'\\' FROM "t"`, 1},

		// PostgreSQL dollar quotes, and $n placeholders that are none.
		{"dollar quote", pg, "SELECT $$ jobs ' $$ FROM jobs", `SELECT $$ jobs ' $$ FROM "t"`, 1},
		{"tagged dollar quote", pg, "SELECT $q$ jobs $$ jobs $q$ FROM jobs WHERE id = $1", `SELECT $q$ jobs $$ jobs $q$ FROM "t" WHERE id = $1`, 1},
		{"placeholders", pg, "UPDATE jobs SET a = $1, b = $2 WHERE c = $3", `UPDATE "t" SET a = $1, b = $2 WHERE c = $3`, 1},
		{"unterminated dollar quote", pg, "SELECT $q$ jobs FROM jobs", "", 0},
		// The table word right after a dollar quote (FuzzRewriteTable's
		// "$$$$joBs"): refused, a reader may take the $ for part of it.
		{"table right after a dollar quote", pg, "SELECT $$x$$jobs", "", 0},
		{"side table right after a dollar quote", pg, "SELECT 1 FROM $q$x$q$jobs_unique", "", 0},
		{"table after a dollar quote and a space", pg, "SELECT $$x$$ FROM jobs", `SELECT $$x$$ FROM "t"`, 1},
		{"other word right after a dollar quote", pg, "SELECT $$x$$y FROM jobs", `SELECT $$x$$y FROM "t"`, 1},
		{"nested comment", pg, "SELECT /* a /* jobs */ jobs */ 1 FROM jobs", `SELECT /* a /* jobs */ jobs */ 1 FROM "t"`, 1},

		// MySQL: backticks, # comments, and -- only before a space.
		{"backticks", my, "SELECT `jobs` FROM jobs", "SELECT `jobs` FROM \"t\"", 1},
		{"backticks", lite, "SELECT `jobs` FROM jobs", "SELECT `jobs` FROM \"t\"", 1},
		{"hash comment", my, "SELECT 1 FROM jobs # jobs\n", "SELECT 1 FROM \"t\" # jobs\n", 1},
		{"double minus without a space", my, "SELECT 1--1 FROM jobs", `SELECT 1--1 FROM "t"`, 1},
		{"flat comment", my, "SELECT /* a /* b */ 1 FROM jobs", `SELECT /* a /* b */ 1 FROM "t"`, 1},
		{"brackets", lite, "SELECT [jobs] FROM jobs", `SELECT [jobs] FROM "t"`, 1},
	}
	for _, c := range cases {
		for _, kind := range c.kinds {
			t.Run(string(kind)+"/"+c.name, func(t *testing.T) {
				got, n, err := rewriteTable(kind, c.in, `"t"`)
				if c.want == "" {
					if !errors.Is(err, errNotRewritten) || got != "" {
						t.Fatalf("rewriteTable(%q) = %q, %v; want an error wrapping errNotRewritten", c.in, got, err)
					}
					return
				}
				if err != nil || got != c.want || n != c.n {
					t.Fatalf("rewriteTable(%q) = %q, %d, %v; want %q, %d", c.in, got, n, err, c.want, c.n)
				}
			})
		}
	}
}

// TestRewriteEveryGeneratedQuery reads every query text sqlc generated for
// the three engines (the string constants of db/*gen) and checks that the
// rewriting replaces exactly each word jobs of it, and nothing else: the
// generated queries keep the word out of literals, comments and aliases.
func TestRewriteEveryGeneratedQuery(t *testing.T) {
	word := regexp.MustCompile(`(?i)\b` + tableWord + `\b`)
	side := regexp.MustCompile(`\b` + tableWord + `_(unique|leader|keyed)\b`) // the side tables and views the queries use
	const marker = `"the table"`
	for _, p := range []struct {
		dir  string
		kind engine.Kind
	}{{"pggen", engine.Postgres}, {"mysqlgen", engine.MySQL}, {"sqlitegen", engine.SQLite}} {
		queries := generatedQueries(t, filepath.Join("..", "db", p.dir))
		if len(queries) < 20 {
			t.Fatalf("db/%s: found only %d generated queries", p.dir, len(queries))
		}
		for name, q := range queries {
			t.Run(p.dir+"/"+name, func(t *testing.T) {
				got, n, err := rewriteTable(p.kind, q, marker)
				if err != nil {
					t.Fatal(err)
				}
				want := word.ReplaceAllString(q, marker)
				sides := side.FindAllString(want, -1)
				want = side.ReplaceAllString(want, `"the table_$1"`)
				if marked := strings.Contains(q, noTableMark); marked != (n == 0) {
					t.Fatalf("%d replacements; marked %s: %v", n, noTableMark, marked)
				}
				if got != want || n != len(word.FindAllString(q, -1))+len(sides) {
					t.Fatalf("%d replacements, text\n%s\nwant\n%s", n, got, want)
				}
			})
		}
	}
}

// generatedQueries returns the query texts of the Go files in dir (their
// string constants that start with sqlc's name line), by constant name.
func generatedQueries(t *testing.T, dir string) map[string]string {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no Go files in %s: %v", dir, err)
	}
	fset := token.NewFileSet()
	out := map[string]string{}
	for _, path := range paths {
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.CONST {
				continue
			}
			for _, s := range g.Specs {
				v := s.(*ast.ValueSpec)
				for i, name := range v.Names {
					lit, ok := v.Values[i].(*ast.BasicLit)
					if !ok || lit.Kind != token.STRING {
						continue
					}
					text, err := strconv.Unquote(lit.Value)
					if err != nil {
						t.Fatalf("%s: %v", name.Name, err)
					}
					if strings.HasPrefix(text, "-- name: ") {
						out[name.Name] = text
					}
				}
			}
		}
	}
	return out
}

// TestUnrewrittenQueryIsNeverSent: a query the rewriting refuses is an
// error on every path of the DBTX, and nothing reaches the database.
func TestUnrewrittenQueryIsNeverSent(t *testing.T) {
	forEachEngine(t, func(t *testing.T, kind engine.Kind) {
		ctx := context.Background()
		env := coreEnv(t, kind)
		r := newRunner(env.db, env.tbl)
		defer r.close()
		sent := 0
		r.observe = func(string, sqlRunner) { sent++ }
		d := r.on(nil)
		const q = "SELECT count(*) FROM information_schema.tables"
		if _, err := d.ExecContext(ctx, q); !errors.Is(err, errNotRewritten) {
			t.Errorf("ExecContext: %v", err)
		}
		if _, err := d.QueryContext(ctx, q); !errors.Is(err, errNotRewritten) {
			t.Errorf("QueryContext: %v", err)
		}
		var n int
		if err := d.QueryRowContext(ctx, q).Scan(&n); !errors.Is(err, errNotRewritten) {
			t.Errorf("QueryRowContext: %v", err)
		}
		if _, err := d.PrepareContext(ctx, q); !errors.Is(err, errNotRewritten) {
			t.Errorf("PrepareContext: %v", err)
		}
		if sent != 0 {
			t.Errorf("%d statements were sent", sent)
		}
	})
}
