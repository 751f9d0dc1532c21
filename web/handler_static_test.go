package web_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/testdb"
	"github.com/jobqueue/jobqueue/web"
)

// TestStaticNoListing: the embedded files are served, their directory is
// not: GET /static/ answers 404, at the root and under a prefix. It
// answered a listing of the embedded files.
func TestStaticNoListing(t *testing.T) {
	e := testdb.New(t, engine.SQLite)
	q := newQueue(t, e)
	h := web.NewHandler(q, web.Options{Logger: testdb.QuietLogger()})
	strip := http.NewServeMux()
	strip.Handle("/admin/queue/", http.StripPrefix("/admin/queue", h))
	prefixed := http.NewServeMux()
	prefixed.Handle("/ops/", web.NewHandler(q, web.Options{Prefix: "/ops", Logger: testdb.QuietLogger()}))
	mounts := map[string]http.Handler{"root": h, "strip": strip, "prefix": prefixed}
	cases := []struct {
		mount, method, target string
		code                  int
	}{
		{"root", "GET", "/static/", http.StatusNotFound},
		{"root", "HEAD", "/static/", http.StatusNotFound},
		{"root", "GET", "/static/nope.css", http.StatusNotFound},
		{"root", "GET", "/static/app.css", http.StatusOK},
		{"root", "HEAD", "/static/app.js", http.StatusOK},
		{"strip", "GET", "/admin/queue/static/", http.StatusNotFound},
		{"strip", "GET", "/admin/queue/static/app.css", http.StatusOK},
		{"prefix", "GET", "/ops/static/", http.StatusNotFound},
		{"prefix", "GET", "/ops/static/app.js", http.StatusOK},
	}
	for _, c := range cases {
		code, body := call(t, mounts[c.mount], c.method, c.target, "")
		if code != c.code {
			t.Errorf("%s: %s %s = %d, want %d:\n%s", c.mount, c.method, c.target, code, c.code, body)
		}
		if c.code == http.StatusNotFound && strings.Contains(body, `href="app.css"`) {
			t.Errorf("%s: %s %s lists the embedded files:\n%s", c.mount, c.method, c.target, body)
		}
	}
}
