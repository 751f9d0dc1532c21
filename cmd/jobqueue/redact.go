package main

import (
	"net/url"
	"slices"
	"strings"
)

// redacted is what a password is replaced with in messages.
const redacted = "xxxxx"

// redactURL hides the passwords of the database URL rawURL in msg, however
// msg quotes it: the URL as written, the URL with only its user info
// password hidden (as the engine prints it), and each password alone, as
// written and decoded. A password is the one of the URL's user info and
// the value of any password= query parameter; the URL need not parse (a
// bad URL is echoed in its error).
func redactURL(msg, rawURL string) string {
	secrets := urlSecrets(rawURL)
	if len(secrets) == 0 {
		return msg
	}
	safe := rawURL
	for _, s := range secrets {
		safe = strings.ReplaceAll(safe, s, redacted)
	}
	msg = strings.ReplaceAll(msg, rawURL, safe)
	if u, err := url.Parse(rawURL); err == nil && u.User != nil {
		msg = strings.ReplaceAll(msg, u.Redacted(), safe)
	}
	for _, s := range secrets {
		// A very short password would also hide unrelated text; the
		// forms above already cover the URL itself.
		if len(s) >= 4 {
			msg = strings.ReplaceAll(msg, s, redacted)
		}
	}
	return msg
}

// safeURL is rawURL with its passwords hidden, for printing.
func safeURL(rawURL string) string { return redactURL(rawURL, rawURL) }

// urlSecrets returns the passwords written in rawURL (see redactURL), each
// as written and, when it differs, decoded; the longest first, so that a
// password containing another is replaced whole.
func urlSecrets(rawURL string) []string {
	var out []string
	add := func(s string) {
		if s == "" || s == redacted {
			return
		}
		out = append(out, s)
		if d, err := url.QueryUnescape(s); err == nil && d != s && d != "" {
			out = append(out, d)
		}
	}
	rest := rawURL
	if _, r, ok := strings.Cut(rawURL, "://"); ok {
		rest = r
	}
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
		if _, pass, ok := strings.Cut(rest[:at], ":"); ok {
			add(pass)
		}
	}
	if _, query, ok := strings.Cut(rawURL, "?"); ok {
		query, _, _ = strings.Cut(query, "#")
		for _, kv := range strings.FieldsFunc(query, func(r rune) bool { return r == '&' || r == ';' }) {
			if k, v, ok := strings.Cut(kv, "="); ok && strings.EqualFold(k, "password") {
				add(v)
			}
		}
	}
	slices.SortStableFunc(out, func(a, b string) int { return len(b) - len(a) })
	return out
}
