package web_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/testdb"
	"github.com/jobqueue/jobqueue/web"
)

// TestRedirectsStayUnderThePrefix: the redirects the handler's router
// answers with (a path without its trailing slash, a path that is not
// clean) keep the prefix the dashboard is mounted under. They sent the
// browser to the root of the site: /admin/queue/api to /api/.
func TestRedirectsStayUnderThePrefix(t *testing.T) {
	e := testdb.New(t, engine.SQLite)
	q := newQueue(t, e)
	h := web.NewHandler(q, web.Options{Logger: testdb.QuietLogger()})
	mux := http.NewServeMux()
	mux.Handle("/admin/queue/", http.StripPrefix("/admin/queue", h))
	mounts := map[string]http.Handler{
		"mux":   mux,
		"strip": http.StripPrefix("/admin/queue", h), // no router in front to clean the path
		"root":  h,
	}
	cases := []struct{ mount, target, location string }{
		{"mux", "/admin/queue/api", "/admin/queue/api/"},
		{"mux", "/admin/queue/static", "/admin/queue/static/"},
		{"mux", "/admin/queue/static?v=1", "/admin/queue/static/?v=1"},
		{"strip", "/admin/queue/api", "/admin/queue/api/"},
		{"strip", "/admin/queue//jobs?status=failed", "/admin/queue/jobs?status=failed"},
		{"strip", "/admin/queue/jobs/../jobs", "/admin/queue/jobs"},
		{"root", "/api", "/api/"},
		{"root", "//jobs", "/jobs"},
	}
	for _, c := range cases {
		w := httptest.NewRecorder()
		mounts[c.mount].ServeHTTP(w, httptest.NewRequest("GET", c.target, nil))
		if w.Code < 300 || w.Code > 399 || w.Header().Get("Location") != c.location {
			t.Errorf("%s: GET %s = %d, Location %q; want a redirect to %s", c.mount, c.target, w.Code, w.Header().Get("Location"), c.location)
		}
	}
}

// TestPrefixOption: with Options.Prefix the dashboard works under that
// path mounted without http.StripPrefix (the handler cuts the prefix
// itself) and behind a proxy that cut it already: its pages link to its
// pages, scripts and styles under the prefix, its API answers there, and
// the prefix alone leads to the overview.
func TestPrefixOption(t *testing.T) {
	e := testdb.New(t, engine.SQLite)
	q := newQueue(t, e)
	s := seed(t, q)
	h := web.NewHandler(q, web.Options{Prefix: "/admin/queue/", Logger: testdb.QuietLogger()})
	mux := http.NewServeMux()
	mux.Handle("/admin/queue/", h)
	mounts := []struct {
		name  string
		h     http.Handler
		reqAt string // the path requests come with, the prefix or none
	}{
		{"mounted without StripPrefix", mux, "/admin/queue"},
		{"behind a proxy that cut the prefix", h, ""},
	}
	for _, m := range mounts {
		t.Run(m.name, func(t *testing.T) {
			code, body := call(t, m.h, "GET", m.reqAt+"/jobs?status=failed", "")
			if code != http.StatusOK {
				t.Fatalf("GET %s/jobs = %d:\n%s", m.reqAt, code, body)
			}
			for _, link := range []string{`href="/admin/queue/static/app.css"`, `src="/admin/queue/static/app.js"`,
				fmt.Sprintf(`href="/admin/queue/jobs/%d"`, s.failed[0]), `data-base="/admin/queue"`, `action="/admin/queue/jobs"`, `href="/admin/queue/"`} {
				if !strings.Contains(body, link) {
					t.Errorf("the jobs page lacks %s", link)
				}
			}
			for _, target := range []string{"/static/app.js", "/static/app.css", "/", fmt.Sprintf("/jobs/%d", s.failed[0]), "/api/stats"} {
				if code, body := call(t, m.h, "GET", m.reqAt+target, ""); code != http.StatusOK {
					t.Errorf("GET %s%s = %d:\n%s", m.reqAt, target, code, body)
				}
			}
			code, body = call(t, m.h, "POST", m.reqAt+"/api/jobs/retry", fmt.Sprintf(`{"ids":[%d]}`, s.failed[0]))
			if code != http.StatusOK || !strings.Contains(body, `"ok":true`) {
				t.Errorf("POST %s/api/jobs/retry = %d %s; want 200, ok", m.reqAt, code, body)
			}
			if _, err := q.CancelMany(context.Background(), []int64{s.failed[0]}); err != nil { // failed again, for the next mount
				t.Fatal(err)
			}
		})
	}
	w := httptest.NewRecorder()
	mux.ServeHTTP(w, httptest.NewRequest("GET", "/admin/queue", nil))
	if w.Code < 300 || w.Code > 399 || w.Header().Get("Location") != "/admin/queue/" {
		t.Errorf("GET /admin/queue = %d, Location %q; want a redirect to /admin/queue/", w.Code, w.Header().Get("Location"))
	}
}
