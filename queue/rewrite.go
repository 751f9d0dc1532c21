package queue

import (
	"errors"
	"fmt"
	"strings"

	"github.com/jobqueue/jobqueue/internal/ddl"
	"github.com/jobqueue/jobqueue/internal/engine"
)

// errNotRewritten marks a query the table rewriting refused: it names no
// table `jobs` (so it would not run against the queue's table), or it is
// not lexically complete. It is a bug of the SQL files, never of the
// caller: TestRewriteEveryGeneratedQuery runs every generated query through
// rewriteTable.
var errNotRewritten = errors.New("jobqueue: internal: a generated query could not be sent to the queue's table")

// tableWord is the table name the generated queries are written against.
const tableWord = "jobs"

// noTableMark is the comment by which a query of the SQL files says that it
// names no table (PostgreSQL's NotifyTypes, MySQL's ProbeTime): the
// rewriting then passes it as it is, and refuses it if it names jobs after
// all.
const noTableMark = "/* jobqueue:no-table */"

// rewriteTable replaces the identifier jobs (any case) with quoted wherever
// it stands as a whole word of SQL, and a side table's jobs_<suffix> with
// the quoted <table>_<suffix>, and returns the result with how many it
// replaced. It reads query as kind's SQL: string literals, quoted
// identifiers and comments are kept as they are —
//   - PostgreSQL: '…' (a doubled quote inside; backslash escapes only in
//     E'…'), "…", dollar quotes $$…$$ and $tag$…$tag$, -- and nested /* */
//     comments;
//   - MySQL: '…' and "…" (both with backslash escapes and doubled quotes),
//     `…`, -- (followed by a space) and # and /* */ comments;
//   - SQLite: '…', "…", `…` and […], -- and /* */ comments.
//
// A query that names no table jobs (unless it is marked with the comment
// noTableMark, and then names none), or has an unterminated literal,
// quoted identifier or comment, is an error wrapping errNotRewritten.
func rewriteTable(kind engine.Kind, query, quoted string) (string, int, error) {
	lx := lexer{kind: kind, q: query}
	var b strings.Builder
	b.Grow(len(query) + 4*len(quoted))
	n, marked := 0, false
	afterDollar := false // the token before was a dollar-quoted string
	for lx.i < len(query) {
		start := lx.i
		word, err := lx.next()
		if err != nil {
			return "", 0, fmt.Errorf("%w: %v at byte %d of %q", errNotRewritten, err, start, query)
		}
		marked = marked || query[start:lx.i] == noTableMark
		prevDollar := afterDollar
		afterDollar = lx.dollar
		table := word && len(query[start:lx.i]) == len(tableWord) && strings.EqualFold(query[start:lx.i], tableWord)
		suffix, side := sideTableWord(query[start:lx.i])
		if (table || word && side) && prevDollar {
			// $$…$$jobs: PostgreSQL reads a word there, but a reader
			// may take the $ for part of it; no query of ours is written so.
			return "", 0, fmt.Errorf("%w: %s right after a dollar-quoted string at byte %d of %q (put a space between them)", errNotRewritten, tableWord, start, query)
		}
		if table {
			b.WriteString(quoted)
			n++
			continue
		}
		if word && side {
			// A side table, jobs_<suffix>: <table>_<suffix>, quoted alike.
			b.WriteString(quoted[:len(quoted)-1] + "_" + suffix + quoted[len(quoted)-1:])
			n++
			continue
		}
		b.WriteString(query[start:lx.i])
	}
	switch {
	case marked && n > 0:
		return "", 0, fmt.Errorf("%w: it is marked %s but names %s: %q", errNotRewritten, noTableMark, tableWord, query)
	case !marked && n == 0:
		return "", 0, fmt.Errorf("%w: it names no table %s (mark a query that needs none with %s): %q", errNotRewritten, tableWord, noTableMark, query)
	}
	return b.String(), n, nil
}

// sideTableWord reports whether w names one of the side tables
// or views (internal/ddl.SideSuffixes) the way the generated queries do,
// jobs_<suffix>, and returns the suffix. Other words that start with jobs_
// are not tables of ours and stay as they are.
func sideTableWord(w string) (string, bool) {
	if len(w) <= len(tableWord)+1 || !strings.EqualFold(w[:len(tableWord)+1], tableWord+"_") {
		return "", false
	}
	suffix := w[len(tableWord)+1:]
	for _, s := range ddl.SideSuffixes() {
		if s == suffix {
			return suffix, true
		}
	}
	return "", false
}

// lexer steps through a query one token at a time: a word, a literal, a
// quoted identifier, a comment or any other byte.
type lexer struct {
	kind engine.Kind
	q    string
	i    int
	// dollar: the last token was a dollar-quoted string.
	dollar bool
}

// next moves past one token and reports whether it was a bare word.
func (l *lexer) next() (word bool, err error) {
	q, i := l.q, l.i
	l.dollar = false
	c := q[i]
	at := func(j int, s string) bool { return strings.HasPrefix(q[j:], s) }
	my, pg, lite := l.kind == engine.MySQL, l.kind == engine.Postgres, l.kind == engine.SQLite
	switch {
	case c == '\'':
		return false, l.quote('\'', my)
	case c == '"':
		return false, l.quote('"', my)
	case c == '`' && (my || lite):
		return false, l.quote('`', false)
	case c == '[' && lite:
		end := strings.IndexByte(q[i:], ']')
		if end < 0 {
			return false, errors.New("unterminated [identifier]")
		}
		l.i = i + end + 1
	case at(i, "--") && (!my || i+2 == len(q) || q[i+2] == ' ' || q[i+2] == '\t' || q[i+2] == '\n' || q[i+2] == '\r'),
		c == '#' && my:
		end := strings.IndexByte(q[i:], '\n')
		if end < 0 {
			end = len(q) - i
		}
		l.i = i + end
	case at(i, "/*"):
		return false, l.blockComment(pg)
	case c == '$' && pg && l.dollarTag() != "":
		tag := l.dollarTag()
		end := strings.Index(q[i+len(tag):], tag)
		if end < 0 {
			return false, fmt.Errorf("unterminated dollar quote %s", tag)
		}
		l.i = i + len(tag) + end + len(tag)
		l.dollar = true
	case isIdentByte(c):
		j := i
		for j < len(q) && isIdentByte(q[j]) {
			j++
		}
		l.i = j
		if pg && j-i == 1 && (c == 'E' || c == 'e') && j < len(q) && q[j] == '\'' {
			return false, l.quote('\'', true) // E'…': an escape string
		}
		return true, nil
	default:
		l.i = i + 1
	}
	return false, nil
}

// quote moves past a literal or quoted identifier that starts at l.i with
// the quote byte c: a doubled c stays inside it, and so does any byte after
// a backslash when backslash escapes apply.
func (l *lexer) quote(c byte, backslash bool) error {
	q := l.q
	for j := l.i + 1; j < len(q); j++ {
		switch {
		case backslash && q[j] == '\\':
			j++
		case q[j] == c && j+1 < len(q) && q[j+1] == c:
			j++
		case q[j] == c:
			l.i = j + 1
			return nil
		}
	}
	return fmt.Errorf("unterminated %c-quoted text", c)
}

// blockComment moves past a /* */ comment; PostgreSQL's nest.
func (l *lexer) blockComment(nested bool) error {
	q := l.q
	depth := 0
	for j := l.i; j+1 < len(q); j++ {
		switch {
		case q[j] == '/' && q[j+1] == '*' && (nested || depth == 0):
			depth++
			j++
		case q[j] == '*' && q[j+1] == '/':
			depth--
			j++
			if depth == 0 {
				l.i = j + 1
				return nil
			}
		}
	}
	return errors.New("unterminated /* comment")
}

// dollarTag is the PostgreSQL dollar-quote opening at l.i ($$ or $tag$,
// the tag an identifier that does not start with a digit), or "" when l.i
// starts none (a $1 placeholder, say).
func (l *lexer) dollarTag() string {
	q := l.q
	j := l.i + 1
	for j < len(q) && q[j] != '$' {
		c := q[j]
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= 0x80 || j > l.i+1 && c >= '0' && c <= '9') {
			return ""
		}
		j++
	}
	if j >= len(q) {
		return ""
	}
	return q[l.i : j+1]
}

func isIdentByte(c byte) bool {
	return c == '_' || c == '$' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c >= 0x80
}
