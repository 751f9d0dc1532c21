package web_test

import (
	"net/http"
	"net/http/httptest"
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
