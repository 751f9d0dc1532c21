package web_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/testdb"
	"github.com/jobqueue/jobqueue/web"
)

// TestUnknownPaths: a path that is no page gets the dashboard's own 404
// page, HTML with a link back to the overview under the prefix the
// dashboard is at; a path under /api that is no route gets a JSON 404
// error like the rest of the API; a job id that is not a number gets 400
// saying so. Unknown pages got the router's plain "404 page not found".
func TestUnknownPaths(t *testing.T) {
	e := testdb.New(t, engine.SQLite)
	q := newQueue(t, e)
	h := web.NewHandler(q, web.Options{Logger: testdb.QuietLogger()})
	strip := http.NewServeMux()
	strip.Handle("/admin/queue/", http.StripPrefix("/admin/queue", h))
	prefixed := http.NewServeMux()
	prefixed.Handle("/ops/", web.NewHandler(q, web.Options{Prefix: "/ops", Logger: testdb.QuietLogger()}))
	mounts := []struct {
		name, base string
		h          http.Handler
	}{{"root", "", h}, {"strip", "/admin/queue", strip}, {"prefix", "/ops", prefixed}}
	const (
		page = "page" // the dashboard's HTML page
		api  = "api"  // a JSON error
	)
	cases := []struct {
		method, path string
		code         int
		kind, says   string
	}{
		{"GET", "/nope", http.StatusNotFound, page, "no page"},
		{"GET", "/jobs/abc/def", http.StatusNotFound, page, "no page"},
		{"GET", "/jobs/1/", http.StatusNotFound, page, "no page"},
		{"POST", "/nope", http.StatusNotFound, page, "no page"},
		{"GET", "/static/", http.StatusNotFound, page, "no page"},
		{"GET", "/static/nope.js", http.StatusNotFound, page, "no page"},
		{"GET", "/jobs/abc", http.StatusBadRequest, page, "bad job id"},
		{"GET", "/api/nope", http.StatusNotFound, api, "no API route"},
		{"GET", "/api/jobs/1/x", http.StatusNotFound, api, "no API route"},
		{"DELETE", "/api/nope", http.StatusNotFound, api, "no API route"},
		{"GET", "/api/jobs/abc", http.StatusBadRequest, api, "bad job id"},
	}
	for _, m := range mounts {
		for _, c := range cases {
			w := httptest.NewRecorder()
			m.h.ServeHTTP(w, httptest.NewRequest(c.method, m.base+c.path, nil))
			body := w.Body.String()
			if w.Code != c.code {
				t.Errorf("%s: %s %s = %d, want %d:\n%s", m.name, c.method, m.base+c.path, w.Code, c.code, body)
				continue
			}
			ct := w.Header().Get("Content-Type")
			switch c.kind {
			case page:
				overview := `href="` + m.base + `/"`
				if !strings.HasPrefix(ct, "text/html") || !strings.Contains(body, overview) || !strings.Contains(body, c.says) {
					t.Errorf("%s: %s %s = %s; want the dashboard's page, saying %q, with a link %s:\n%s", m.name, c.method, m.base+c.path, ct, c.says, overview, body)
				}
			case api:
				if msg := decode[map[string]string](t, body)["error"]; !strings.HasPrefix(ct, "application/json") || !strings.Contains(msg, c.says) {
					t.Errorf("%s: %s %s = %s %q; want a JSON error saying %q", m.name, c.method, m.base+c.path, ct, body, c.says)
				}
			}
		}
	}
}

// TestPageWrongMethodIs405: a page asked with a method other than GET or
// HEAD answers 405 with an Allow header, not 404.
func TestPageWrongMethodIs405(t *testing.T) {
	e := testdb.New(t, engine.SQLite)
	q := newQueue(t, e)
	h := web.NewHandler(q, web.Options{Logger: testdb.QuietLogger()})
	for _, c := range []struct{ method, target string }{
		{"POST", "/"},
		{"PUT", "/jobs"},
		{"DELETE", "/jobs/1"},
		{"POST", "/static/app.css"},
	} {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(c.method, c.target, nil))
		if w.Code != http.StatusMethodNotAllowed || w.Header().Get("Allow") != "GET, HEAD" {
			t.Errorf("%s %s = %d, Allow %q; want 405, Allow %q", c.method, c.target, w.Code, w.Header().Get("Allow"), "GET, HEAD")
		}
	}
}
