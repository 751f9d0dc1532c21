package engine

import (
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// redacted is what a password is replaced with in messages.
const redacted = "xxxxx"

// RedactURL hides the passwords of the database URL rawURL in msg, however
// msg quotes it: the URL as written, the URL with only its user info
// password hidden (as the engine prints it), and each password alone, as
// written and decoded; each of these also as strconv.Quote writes it (%q
// escapes '"' and '\'). A password is the one of the URL's user info and
// the value of any password= query parameter; the URL need not parse (a
// bad URL is echoed in its error). In the URL only the passwords are
// replaced, so the rest of it (sslmode=disable, for a password "ab") is
// shown as it is.
func RedactURL(msg, rawURL string) string {
	safe, secrets := hidePasswords(rawURL)
	if len(secrets) == 0 {
		return msg
	}
	forms := []string{rawURL}
	if u, err := url.Parse(rawURL); err == nil && u.User != nil {
		forms = append(forms, u.Redacted())
	}
	for _, f := range forms {
		msg = strings.ReplaceAll(msg, f, safe)
		if q := quoted(f); q != f {
			msg = strings.ReplaceAll(msg, q, quoted(safe))
		}
	}
	// The passwords alone, outside the URL (whose other parts may hold the
	// same letters: mysql://root:root@h/root).
	return outside(msg, []string{safe, quoted(safe)}, func(text string) string {
		for _, s := range secrets {
			// A very short password would also hide unrelated text; the
			// forms above already cover the URL itself.
			if len(s) < 4 {
				continue
			}
			text = strings.ReplaceAll(text, s, redacted)
			if q := quoted(s); q != s {
				text = strings.ReplaceAll(text, q, redacted)
			}
		}
		return text
	})
}

// outside applies fn to the text of msg between the occurrences of the
// strings of keep, which it leaves as they are.
func outside(msg string, keep []string, fn func(string) string) string {
	var b strings.Builder
	for {
		at, n := -1, 0
		for _, k := range keep {
			if i := strings.Index(msg, k); k != "" && i >= 0 && (at < 0 || i < at || i == at && len(k) > n) {
				at, n = i, len(k)
			}
		}
		if at < 0 {
			b.WriteString(fn(msg))
			return b.String()
		}
		b.WriteString(fn(msg[:at]))
		b.WriteString(msg[at : at+n])
		msg = msg[at+n:]
	}
}

// quoted is s as strconv.Quote writes it, without the enclosing quotes:
// how s appears inside a %q.
func quoted(s string) string {
	q := strconv.Quote(s)
	return q[1 : len(q)-1]
}

// SafeURL is rawURL with its passwords (see RedactURL) hidden, for
// printing and for the errors that quote a database URL.
func SafeURL(rawURL string) string { return RedactURL(rawURL, rawURL) }

// hidePasswords returns rawURL with each password (see RedactURL) replaced
// by redacted, and the passwords, each as written and, when it differs,
// decoded; the longest first, so that a password containing another is
// replaced whole.
func hidePasswords(rawURL string) (safe string, secrets []string) {
	spans := passwordSpans(rawURL)
	var b strings.Builder
	end := 0
	for _, sp := range spans {
		s := rawURL[sp[0]:sp[1]]
		if s == "" || s == redacted {
			continue
		}
		secrets = append(secrets, s)
		if d, err := url.QueryUnescape(s); err == nil && d != s && d != "" {
			secrets = append(secrets, d)
		}
		b.WriteString(rawURL[end:sp[0]])
		b.WriteString(redacted)
		end = sp[1]
	}
	b.WriteString(rawURL[end:])
	slices.SortStableFunc(secrets, func(a, b string) int { return len(b) - len(a) })
	return b.String(), secrets
}

// passwordSpans returns where the passwords of rawURL are, as [start, end)
// byte offsets in order and not overlapping: the user info password, and
// the value of each password= query parameter.
func passwordSpans(rawURL string) [][2]int {
	var spans [][2]int
	start := 0
	if i := strings.Index(rawURL, "://"); i >= 0 {
		start = i + len("://")
	}
	rest := rawURL[start:]
	// The user info ends at the last '@' of the authority, which ends at
	// the first '/', '?' or '#'; a password with a bare '/' (not a valid
	// URL) ends the authority early, so then the last '@' of the whole
	// text is taken.
	authority := rest
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		authority = rest[:i]
	}
	at := strings.LastIndex(authority, "@")
	if at < 0 {
		at = strings.LastIndex(rest, "@")
	}
	if at >= 0 {
		if colon := strings.Index(rest[:at], ":"); colon >= 0 {
			spans = append(spans, [2]int{start + colon + 1, start + at})
		}
	}
	if q := strings.Index(rawURL, "?"); q >= 0 {
		queryEnd := len(rawURL)
		if h := strings.Index(rawURL[q:], "#"); h >= 0 {
			queryEnd = q + h
		}
		for i := q + 1; i < queryEnd; {
			j := strings.IndexAny(rawURL[i:queryEnd], "&;")
			if j < 0 {
				j = queryEnd - i
			}
			if k, _, ok := strings.Cut(rawURL[i:i+j], "="); ok && strings.EqualFold(k, "password") {
				spans = append(spans, [2]int{i + len(k) + 1, i + j})
			}
			i += j + 1
		}
	}
	// A query inside the user info password ("u:a?password=b@h") gives
	// spans that overlap: keep them in order, merged.
	slices.SortFunc(spans, func(a, b [2]int) int { return a[0] - b[0] })
	var merged [][2]int
	for _, sp := range spans {
		if n := len(merged); n > 0 && sp[0] <= merged[n-1][1] {
			merged[n-1][1] = max(merged[n-1][1], sp[1])
			continue
		}
		merged = append(merged, sp)
	}
	return merged
}
