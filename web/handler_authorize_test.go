package web_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/testdb"
	"github.com/jobqueue/jobqueue/web"
)

// TestAuthorizeAfterRouting: the request is routed first; Authorize is
// asked only for a request one of the dashboard's routes takes, with that
// route's action, and a refusal is 403. A path that is no route gets 404,
// a route's path asked with another method 405, and a path the router
// cleans its redirect, whatever Authorize would say and without asking
// it: Authorize was asked before routing, so it saw requests that were
// not the dashboard's (a refusing hook turned every 404 and 405 into
// 403), with the action guessed from the end of the path.
func TestAuthorizeAfterRouting(t *testing.T) {
	e := testdb.New(t, engine.SQLite)
	q := newQueue(t, e)
	const none = web.Action("(not asked)")
	cases := []struct {
		prefix, method, target string
		code                   int
		asked                  web.Action
	}{
		{"", "GET", "/", http.StatusForbidden, web.ActionView},
		{"", "HEAD", "/jobs", http.StatusForbidden, web.ActionView},
		{"", "GET", "/jobs/7", http.StatusForbidden, web.ActionView},
		{"", "GET", "/static/app.js", http.StatusForbidden, web.ActionView},
		{"", "GET", "/api/jobs/7", http.StatusForbidden, web.ActionView},
		{"", "GET", "/api/health", http.StatusOK, none}, // the probes' (TestHealthWithoutAuthorize)
		{"", "POST", "/api/jobs/retry", http.StatusForbidden, web.ActionRetry},
		{"", "POST", "/api/jobs/cancel", http.StatusForbidden, web.ActionCancel},
		{"", "POST", "/api/jobs/delete", http.StatusForbidden, web.ActionDelete},
		{"", "POST", "/api/maintenance/expire", http.StatusForbidden, web.ActionExpire},
		{"", "POST", "/api/maintenance/reclaim", http.StatusForbidden, web.ActionReclaim},
		{"", "POST", "/api/maintenance/prune", http.StatusForbidden, web.ActionPrune},
		{"/ops", "POST", "/ops/api/jobs/retry", http.StatusForbidden, web.ActionRetry},
		{"/ops", "GET", "/ops/jobs", http.StatusForbidden, web.ActionView},

		{"", "GET", "/nope", http.StatusNotFound, none},
		{"", "GET", "/favicon.ico", http.StatusNotFound, none},
		{"", "GET", "/static/nope.js", http.StatusNotFound, none},
		{"", "GET", "/static/", http.StatusNotFound, none},
		{"", "GET", "/jobs/1/", http.StatusNotFound, none},
		{"", "GET", "/api/nope", http.StatusNotFound, none},
		{"", "POST", "/jobs/retry", http.StatusMethodNotAllowed, none}, // GET /jobs/{id}
		{"", "POST", "/jobs/7/retry", http.StatusNotFound, none},
		{"", "POST", "/api/jobs/7/delete", http.StatusNotFound, none},
		{"", "POST", "/api/maintenance/x/expire", http.StatusNotFound, none},
		{"", "DELETE", "/api/jobs/1", http.StatusMethodNotAllowed, none},
		{"", "PUT", "/api/jobs/cancel", http.StatusMethodNotAllowed, none},
		{"", "GET", "/api/jobs/retry", http.StatusMethodNotAllowed, none},
		{"", "POST", "/jobs", http.StatusMethodNotAllowed, none},
		{"", "GET", "//jobs", http.StatusTemporaryRedirect, none},
		{"", "POST", "/api//jobs/./delete", http.StatusTemporaryRedirect, none},
		{"/ops", "GET", "/elsewhere/app", http.StatusNotFound, none},
	}
	for _, c := range cases {
		var asked []web.Action
		h := web.NewHandler(q, web.Options{Prefix: c.prefix, Logger: testdb.QuietLogger(), Authorize: func(r *http.Request, a web.Action) error {
			asked = append(asked, a)
			if want := strings.TrimPrefix(c.target, c.prefix); r.URL.Path != want {
				t.Errorf("prefix %q: %s %s: Authorize saw the path %q; want the dashboard's own %q", c.prefix, c.method, c.target, r.URL.Path, want)
			}
			return errors.New("nobody may")
		}})
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(c.method, c.target, nil))
		got := none
		if len(asked) > 0 {
			got = asked[0]
		}
		if w.Code != c.code || got != c.asked || len(asked) > 1 {
			t.Errorf("prefix %q: %s %s = %d, Authorize asked %q; want %d, asked %q (at most once)", c.prefix, c.method, c.target, w.Code, asked, c.code, c.asked)
		}
	}
}

// TestUnroutedAnswersShowNoTable: with Authorize set, the 404 and 405
// pages a request gets without Authorize being asked, and the 403 page of
// a request it refused, do not name the queue's table, which every other
// page shows in its title and header: they reveal which paths the
// dashboard has, nothing of the queue. They named it to anyone. Without
// Authorize they name it as every page does.
func TestUnroutedAnswersShowNoTable(t *testing.T) {
	e := testdb.New(t, engine.SQLite)
	table := e.Table(t)
	q := newQueue(t, e, table)
	for _, c := range []struct {
		method, target string
		code, refused  int // without Authorize, with one that refuses
	}{
		{"GET", "/nope", http.StatusNotFound, http.StatusNotFound},
		{"GET", "/static/nope.css", http.StatusNotFound, http.StatusNotFound},
		{"POST", "/jobs", http.StatusMethodNotAllowed, http.StatusMethodNotAllowed},
		{"GET", "/jobs", http.StatusOK, http.StatusForbidden},
		{"GET", "/jobs/987654321", http.StatusNotFound, http.StatusForbidden},
	} {
		for _, authorize := range []bool{false, true} {
			opts, code := web.Options{Logger: testdb.QuietLogger()}, c.code
			if authorize {
				code = c.refused
				opts.Authorize = func(r *http.Request, a web.Action) error { return errors.New("log in first") }
			}
			w := httptest.NewRecorder()
			web.NewHandler(q, opts).ServeHTTP(w, httptest.NewRequest(c.method, c.target, nil))
			if shows := strings.Contains(w.Body.String(), table); w.Code != code || shows == authorize {
				t.Errorf("%s %s (Authorize set: %v) = %d, names the table: %v; want %d, naming it only without Authorize:\n%s",
					c.method, c.target, authorize, w.Code, shows, code, w.Body.String())
			}
		}
	}
}

// TestCrossOriginAfterRouting: a request from another origin is refused
// (403) only when one of the dashboard's routes takes it; one that no
// route takes gets its 404 or 405, as from any origin, since it changes
// nothing. The cross-origin check ran before routing, so a POST to a path
// that does not exist was told it came from the wrong origin.
func TestCrossOriginAfterRouting(t *testing.T) {
	e := testdb.New(t, engine.SQLite)
	q := newQueue(t, e)
	h := web.NewHandler(q, web.Options{Logger: testdb.QuietLogger()})
	cases := []struct {
		method, target string
		code           int
	}{
		{"POST", "/api/jobs/retry", http.StatusForbidden},
		{"POST", "/api/maintenance/prune", http.StatusForbidden},
		{"POST", "/nope", http.StatusNotFound},
		{"POST", "/api/nope", http.StatusNotFound},
		{"PUT", "/api/jobs/retry", http.StatusMethodNotAllowed},
		{"DELETE", "/api/jobs/1", http.StatusMethodNotAllowed},
		{"POST", "/jobs", http.StatusMethodNotAllowed},
		{"GET", "/api/stats", http.StatusOK},
	}
	for _, c := range cases {
		for _, hd := range [][]string{{"Sec-Fetch-Site", "cross-site"}, {"Origin", "https://evil.example"}} {
			code, body := call(t, h, c.method, c.target, "", hd...)
			if code != c.code {
				t.Errorf("%s %s with %s = %d %s; want %d", c.method, c.target, hd, code, body, c.code)
			}
		}
	}
}
