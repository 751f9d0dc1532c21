package queue

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// textProblem is the one rule for the text a job is found by (its kind, its
// type, its unique key, as given to Enqueue and as given to a filter): 1 to
// max characters (not bytes) of valid UTF-8, without NUL and not ending in a
// space, so that the three engines store and compare it alike. PostgreSQL's
// text cannot hold a NUL (MySQL and SQLite would, so such a job was written
// on two engines and refused on the third with a server error), and MySQL's
// collations pad with spaces when they compare (utf8mb4_bin is PAD SPACE on
// MySQL 8.0 and MariaDB alike), so "report " was the same unique key, type
// and kind as "report" there and different ones elsewhere. It says what is
// wrong with s, after the name of the thing, or "" when nothing is.
func textProblem(s string, max int) string {
	switch n := utf8.RuneCountInString(s); {
	case n == 0:
		return "is empty"
	case !utf8.ValidString(s):
		return fmt.Sprintf("%.20q is not valid UTF-8", s)
	case strings.IndexByte(s, 0) >= 0:
		return fmt.Sprintf("%.20q contains a NUL character, which PostgreSQL cannot store", s)
	case strings.HasSuffix(s, " "):
		return fmt.Sprintf("%.20q ends with a space, which MySQL ignores when it compares; remove it", s)
	case n > max:
		return fmt.Sprintf("%.20q… has %d characters; at most %d are allowed", s, n, max)
	}
	return ""
}

// noJobHas reports whether a filter value s, for a column of at most max
// characters, can match no job because no job can hold it (textProblem):
// the readers answer "nothing" for it without asking the database, which
// would refuse it on PostgreSQL. The empty filter ("no filter") is not such
// a value.
func noJobHas(s string, max int) bool {
	return s != "" && textProblem(s, max) != ""
}
