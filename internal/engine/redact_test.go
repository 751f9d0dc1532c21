package engine

import (
	"testing"
)

// TestRedactURL: the passwords of a database URL are hidden in a message
// however it quotes the URL or a password, and nothing else is changed.
func TestRedactURL(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, url, msg, want string
	}{
		{"no password", "postgres://u@h/db", "at postgres://u@h/db: refused", "at postgres://u@h/db: refused"},
		{"the URL echoed", "postgress://u:pw@h/db", `unknown scheme in "postgress://u:pw@h/db"`, `unknown scheme in "postgress://u:xxxxx@h/db"`},
		{"the engine's redacted form", "postgres://u:pw@h/db?password=pw2", "at postgres://u:xxxxx@h/db?password=pw2: refused", "at postgres://u:xxxxx@h/db?password=xxxxx: refused"},
		{"an escaped password", "mysql://u:p%40ss%3Aword@h/db", "auth failed for p@ss:word", "auth failed for xxxxx"},
		{"an @ in the password", "mysql://u:se@cret@h:1/db", "parse mysql://u:se@cret@h:1/db", "parse mysql://u:xxxxx@h:1/db"},
		{"a bare / in the password", "postgres://u:se/cret@h/db", `parse "postgres://u:se/cret@h/db": bad`, `parse "postgres://u:xxxxx@h/db": bad`},
		{"a password in the query only", "postgres://h/db?sslmode=disable&password=hunter22", "at postgres://h/db?sslmode=disable&password=hunter22", "at postgres://h/db?sslmode=disable&password=xxxxx"},
		{"sqlite", "sqlite:/tmp/x.db", "open sqlite:/tmp/x.db", "open sqlite:/tmp/x.db"},
		{"a short password elsewhere in the text is left", "postgres://u:ab@h/db", "about ab", "about ab"},
		// Only the passwords are hidden in the URL, not the same letters
		// elsewhere in it.
		{"a short password, the rest of the URL kept", "postgres://u:ab@h/db?sslmode=disable", "at postgres://u:xxxxx@h/db?sslmode=disable: refused", "at postgres://u:xxxxx@h/db?sslmode=disable: refused"},
		{"a short password, the URL as written", "postgres://u:ab@h/ab?sslmode=disable&password=ab", "at postgres://u:ab@h/ab?sslmode=disable&password=ab", "at postgres://u:xxxxx@h/ab?sslmode=disable&password=xxxxx"},
		{"a password that is also the user name", "mysql://root:root@h/root", "parse mysql://root:root@h/root", "parse mysql://root:xxxxx@h/root"},
		// %q escapes '"' and '\\' in the URL and in the password.
		{"a quote in the password, the URL quoted", `mysql://u:pa"ss@h/db`, `parse "mysql://u:pa\"ss@h/db": bad`, `parse "mysql://u:xxxxx@h/db": bad`},
		{"a backslash in the password, the URL quoted", `mysql://u:pa\ss@h/db`, `parse "mysql://u:pa\\ss@h/db": bad`, `parse "mysql://u:xxxxx@h/db": bad`},
		{"a short quoted password, the URL quoted", `mysql://u:"@h/db?x=a"`, `parse "mysql://u:\"@h/db?x=a\"": bad`, `parse "mysql://u:xxxxx@h/db?x=a\"": bad`},
		{"a quote in the password, the password quoted", `mysql://u:pa"ss@h/db`, `password "pa\"ss" refused`, `password "xxxxx" refused`},
		{"a quote in a query password, the URL quoted", `postgres://h/db?password=pa"ss&sslmode=disable`, `in "postgres://h/db?password=pa\"ss&sslmode=disable"`, `in "postgres://h/db?password=xxxxx&sslmode=disable"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := RedactURL(c.msg, c.url); got != c.want {
				t.Errorf("RedactURL(%q) = %q, want %q", c.msg, got, c.want)
			}
		})
	}
}

// TestSafeURL: the URL the errors of DriverDSN and Open quote, and the
// CLI prints (demo): every password hidden, the rest as written, also
// for a URL that does not parse.
func TestSafeURL(t *testing.T) {
	t.Parallel()
	cases := []struct{ url, want string }{
		{"postgres://u:s3cret@h/db", "postgres://u:xxxxx@h/db"},
		{"postgres://u@h/db?sslmode=disable", "postgres://u@h/db?sslmode=disable"},
		{"postgres://u@h/db?password=hunter22&sslmode=disable", "postgres://u@h/db?password=xxxxx&sslmode=disable"},
		{"mysql://u:pw@h/db?PASSWORD=pw2", "mysql://u:xxxxx@h/db?PASSWORD=xxxxx"},
		{"mysql://u:secret@[::1/test", "mysql://u:xxxxx@[::1/test"},
		{"postgres://u:se/cret@h/db", "postgres://u:xxxxx@h/db"},
		{"sqlite:/tmp/x.db", "sqlite:/tmp/x.db"},
		{"jobs.db", "jobs.db"},
	}
	for _, c := range cases {
		if got := SafeURL(c.url); got != c.want {
			t.Errorf("SafeURL(%q) = %q, want %q", c.url, got, c.want)
		}
	}
}
