package web_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/testdb"
	"github.com/jobqueue/jobqueue/web"
)

// TestSecurityHeadersOnEveryAnswer: every answer of the dashboard (pages,
// the JSON API and its errors, assets, redirects, refusals) carries the
// same security headers: nosniff, no framing, the content security
// policy. Only the HTML pages did: the JSON answers went without
// X-Content-Type-Options: nosniff, so a browser could sniff a job's text
// in them as HTML.
func TestSecurityHeadersOnEveryAnswer(t *testing.T) {
	e := testdb.New(t, engine.SQLite)
	q := newQueue(t, e)
	plain := web.NewHandler(q, web.Options{Logger: testdb.QuietLogger()})
	readOnly := web.NewHandler(q, web.Options{ReadOnly: true, Logger: testdb.QuietLogger()})
	refusing := web.NewHandler(q, web.Options{Logger: testdb.QuietLogger(), Authorize: func(r *http.Request, a web.Action) error {
		return errors.New("log in first")
	}})
	cases := []struct {
		name           string
		h              http.Handler
		method, target string
		code           int
		header         []string
	}{
		{"page", plain, "GET", "/jobs", http.StatusOK, nil},
		{"bad filter page", plain, "GET", "/jobs?status=nope", http.StatusBadRequest, nil},
		{"404 page", plain, "GET", "/nope", http.StatusNotFound, nil},
		{"405 page", plain, "POST", "/jobs", http.StatusMethodNotAllowed, nil},
		{"asset", plain, "GET", "/static/app.js", http.StatusOK, nil},
		{"API", plain, "GET", "/api/jobs", http.StatusOK, nil},
		{"API stats", plain, "GET", "/api/stats", http.StatusOK, nil},
		{"health", plain, "GET", "/api/health", http.StatusOK, nil},
		{"API 400", plain, "GET", "/api/jobs?limit=0", http.StatusBadRequest, nil},
		{"API 404", plain, "GET", "/api/jobs/987654", http.StatusNotFound, nil},
		{"API no route", plain, "GET", "/api/nope", http.StatusNotFound, nil},
		{"API 405", plain, "GET", "/api/jobs/retry", http.StatusMethodNotAllowed, nil},
		{"read-only 403", readOnly, "POST", "/api/jobs/retry", http.StatusForbidden, nil},
		{"cross-origin 403", plain, "POST", "/api/jobs/retry", http.StatusForbidden, []string{"Sec-Fetch-Site", "cross-site"}},
		{"Authorize 403 page", refusing, "GET", "/jobs", http.StatusForbidden, nil},
		{"Authorize 403 API", refusing, "GET", "/api/stats", http.StatusForbidden, nil},
		{"redirect", plain, "GET", "//jobs", http.StatusTemporaryRedirect, nil},
		{"beside the dashboard", web.SecurityHeaders(http.NotFoundHandler()), "GET", "/metrics", http.StatusNotFound, nil},
		{"the dashboard wrapped", web.SecurityHeaders(plain), "GET", "/jobs", http.StatusOK, nil},
	}
	want := map[string]string{
		"X-Content-Type-Options": "nosniff",
		"X-Frame-Options":        "DENY",
	}
	var policy string
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := httptest.NewRequest(c.method, c.target, nil)
			for i := 0; i+1 < len(c.header); i += 2 {
				r.Header.Set(c.header[i], c.header[i+1])
			}
			w := httptest.NewRecorder()
			c.h.ServeHTTP(w, r)
			if w.Code != c.code {
				t.Fatalf("%s %s = %d; want %d", c.method, c.target, w.Code, c.code)
			}
			for k, v := range want {
				if got := w.Header().Values(k); len(got) != 1 || got[0] != v {
					t.Errorf("%s %s: %s is %q; want %q once", c.method, c.target, k, got, v)
				}
			}
			csp := w.Header().Values("Content-Security-Policy")
			if len(csp) != 1 || csp[0] == "" || policy != "" && csp[0] != policy {
				t.Errorf("%s %s: Content-Security-Policy is %q; want once, as on the other answers (%q)", c.method, c.target, csp, policy)
			}
			if policy == "" && len(csp) == 1 {
				policy = csp[0]
			}
		})
	}
}
