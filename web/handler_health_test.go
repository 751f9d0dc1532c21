package web_test

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/testdb"
	"github.com/jobqueue/jobqueue/web"
)

// TestHealthWithoutAuthorize: GET (and HEAD) /api/health answers without
// asking Authorize, read-only or not, under a prefix or not, so that a
// load balancer's or Kubernetes' probe reaches it when the application's
// Authorize wants a login; and its answer says only whether the queue can
// be read: {"status":"ok"} or 503 {"status":"unavailable"}, never the
// table's name nor the database's error (which is logged). It was asked
// like every route, so a refusing Authorize turned every probe into 403,
// and it answered the table's name, and on failure the database's error,
// to anyone.
func TestHealthWithoutAuthorize(t *testing.T) {
	e := testdb.New(t, engine.SQLite)
	table := e.Table(t)
	q := newQueue(t, e, table)
	refuse := func(r *http.Request, a web.Action) error {
		t.Errorf("Authorize asked about %s %s (%s)", r.Method, r.URL.Path, a)
		return errors.New("log in first")
	}
	cases := []struct {
		name, method, target string
		opts                 web.Options
	}{
		{"GET", "GET", "/api/health", web.Options{Authorize: refuse}},
		{"HEAD", "HEAD", "/api/health", web.Options{Authorize: refuse}},
		{"read-only", "GET", "/api/health", web.Options{Authorize: refuse, ReadOnly: true}},
		{"prefix option", "GET", "/ops/api/health", web.Options{Authorize: refuse, Prefix: "/ops"}},
		{"no Authorize", "GET", "/api/health", web.Options{}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.opts.Logger = testdb.QuietLogger()
			w := httptest.NewRecorder()
			web.NewHandler(q, c.opts).ServeHTTP(w, httptest.NewRequest(c.method, c.target, nil))
			// For HEAD the recorder keeps the body a server leaves out.
			want := `{"status":"ok"}` + "\n"
			if w.Code != http.StatusOK || w.Body.String() != want {
				t.Errorf("%s %s = %d %q; want 200 %q", c.method, c.target, w.Code, w.Body.String(), want)
			}
		})
	}

	// The queue cannot be read: 503, saying nothing more; the log has why.
	logs := &logBuffer{}
	h := web.NewHandler(q, web.Options{Authorize: refuse, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if _, err := e.DB.ExecContext(context.Background(), "DROP TABLE "+table); err != nil {
		t.Fatal(err)
	}
	code, body := call(t, h, "GET", "/api/health", "")
	if want := `{"status":"unavailable"}`; code != http.StatusServiceUnavailable || strings.TrimSpace(body) != want {
		t.Errorf("GET /api/health with the table dropped = %d %s; want 503 %s", code, body, want)
	}
	if !strings.Contains(logs.String(), "health check failed") || !strings.Contains(logs.String(), table) {
		t.Errorf("the failed health check was not logged with its error:\n%s", logs.String())
	}
}
