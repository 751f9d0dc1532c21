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

// TestReadOnlyChecksTheMethodFirst: a read-only dashboard answers 403 only
// to the mutating routes asked with their method (POST); another method
// gets 405 with an Allow header, and a path that is no route 404, as on a
// writable dashboard. Every request that was not GET or HEAD got 403
// "read-only", so OPTIONS /api/jobs/retry or DELETE /api/jobs/1 said the
// dashboard was read-only rather than that the method is wrong.
func TestReadOnlyChecksTheMethodFirst(t *testing.T) {
	e := testdb.New(t, engine.SQLite)
	q := newQueue(t, e)
	h := web.NewHandler(q, web.Options{ReadOnly: true, Logger: testdb.QuietLogger()})
	cases := []struct {
		method, target string
		code           int
		allow          string
	}{
		{"OPTIONS", "/api/jobs/retry", http.StatusMethodNotAllowed, "POST"},
		{"PUT", "/api/jobs/cancel", http.StatusMethodNotAllowed, "POST"},
		{"DELETE", "/api/jobs/delete", http.StatusMethodNotAllowed, "POST"},
		{"PATCH", "/api/maintenance/prune", http.StatusMethodNotAllowed, "POST"},
		{"DELETE", "/api/jobs/1", http.StatusMethodNotAllowed, "GET"},
		{"POST", "/api/stats", http.StatusMethodNotAllowed, "GET"},
		{"POST", "/jobs", http.StatusMethodNotAllowed, "GET, HEAD"},
		{"PUT", "/", http.StatusMethodNotAllowed, "GET, HEAD"},
		{"POST", "/api/nope", http.StatusNotFound, ""},
		{"POST", "/nope", http.StatusNotFound, ""},
		{"POST", "/api/jobs/retry", http.StatusForbidden, ""},
		{"POST", "/api/maintenance/reclaim", http.StatusForbidden, ""},
	}
	for _, c := range cases {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(c.method, c.target, nil))
		body := strings.TrimSpace(w.Body.String())
		if w.Code != c.code || w.Header().Get("Allow") != c.allow {
			t.Errorf("read-only %s %s = %d, Allow %q, %s; want %d, Allow %q", c.method, c.target, w.Code, w.Header().Get("Allow"), body, c.code, c.allow)
			continue
		}
		if refused := strings.Contains(body, "the dashboard is read-only: actions are disabled"); refused != (c.code == http.StatusForbidden) {
			t.Errorf("read-only %s %s = %d %s; the body refuses an action with 403 only", c.method, c.target, w.Code, body)
		}
	}
}
