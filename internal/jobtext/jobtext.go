// Package jobtext holds the one rule for the text a job is found by (its
// kind, its type, its unique key, a periodic job's name), so that the queue
// and the command line refuse the same text with the same words.
package jobtext

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// The most characters (not bytes) of each text.
const (
	MaxKind         = 255
	MaxType         = 64
	MaxUniqueKey    = 255
	MaxPeriodicName = 200 // so that a tick's unique key (name and time) fits MaxUniqueKey
)

// Problem says what is wrong with s, a text of at most max characters,
// after the name of the thing ("" when nothing is): 1 to max characters of
// valid UTF-8, without NUL and not ending in a space, so that the three
// engines store and compare it alike. PostgreSQL's text cannot hold a NUL
// (MySQL and SQLite would, so such a job was written on two engines and
// refused on the third with a server error), and MySQL's collations pad
// with spaces when they compare (utf8mb4_bin is PAD SPACE on MySQL 8.0 and
// MariaDB alike), so "report " was the same unique key, type and kind as
// "report" there and different ones elsewhere.
func Problem(s string, max int) string {
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
