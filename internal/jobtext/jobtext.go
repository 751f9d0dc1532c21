// Package jobtext holds the one rule for the text a job is found by (its
// kind, its type, its unique key, a periodic job's name), so that the queue
// and the command line refuse the same text with the same words.
package jobtext

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/jobqueue/jobqueue/internal/engine"
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

// PayloadProblem says what is wrong with a JSON payload for the engine k,
// after the words "the payload" ("" when nothing is): PostgreSQL's JSONB
// cannot store the escape \u0000, which the other engines store. The queue
// refuses such a job with these words, and the command line before it
// connects.
func PayloadProblem(k engine.Kind, payload []byte) string {
	if k == engine.Postgres && HasNULEscape(payload) {
		return `contains \u0000, which PostgreSQL's JSONB cannot store`
	}
	return ""
}

// HasNULEscape reports whether the JSON text js holds the escape \u0000
// (an escaped backslash followed by "u0000" is not one).
func HasNULEscape(js []byte) bool {
	for i := 0; i < len(js); i++ {
		if js[i] != '\\' {
			continue
		}
		if i+5 < len(js) && js[i+1] == 'u' && string(js[i+2:i+6]) == "0000" {
			return true
		}
		i++ // the escaped character
	}
	return false
}
