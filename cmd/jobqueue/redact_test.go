package main

import (
	"strings"
	"testing"
)

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
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := redactURL(c.msg, c.url); got != c.want {
				t.Errorf("redactURL(%q) = %q, want %q", c.msg, got, c.want)
			}
		})
	}
	if got := safeURL("postgres://u:s3cret@h/db"); strings.Contains(got, "s3cret") || !strings.HasPrefix(got, "postgres://u:") {
		t.Errorf("safeURL = %q", got)
	}
}
