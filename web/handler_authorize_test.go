package web_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/testdb"
	"github.com/jobqueue/jobqueue/web"
)

// TestAuthorizeActionOfTheRoute: Authorize is asked with an action only
// for an action's own path; any other path gets "" whatever its last
// segment, as Options.Authorize says. POST /jobs/retry or
// /api/jobs/7/delete, which no route takes, were asked as retry and
// delete, from the end of the path alone, and logged so when refused.
func TestAuthorizeActionOfTheRoute(t *testing.T) {
	e := testdb.New(t, engine.SQLite)
	q := newQueue(t, e)
	cases := []struct {
		method, target string
		want           web.Action
	}{
		{"POST", "/api/jobs/retry", web.ActionRetry},
		{"PUT", "/api/jobs/cancel", web.ActionCancel},
		{"POST", "/api/maintenance/prune", web.ActionPrune},
		{"POST", "/api//jobs/./delete", web.ActionDelete}, // the router cleans it and redirects
		{"GET", "/api/jobs/retry", web.ActionView},
		{"POST", "/jobs/retry", ""},
		{"POST", "/api/jobs/7/delete", ""},
		{"POST", "/api/maintenance/x/expire", ""},
		{"POST", "/reclaim", ""},
		{"DELETE", "/api/jobs/1", ""},
	}
	for _, c := range cases {
		var got []web.Action
		h := web.NewHandler(q, web.Options{Logger: testdb.QuietLogger(), Authorize: func(r *http.Request, a web.Action) error {
			got = append(got, a)
			return nil
		}})
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(c.method, c.target, nil))
		if len(got) != 1 || got[0] != c.want {
			t.Errorf("%s %s: Authorize asked with %q; want %q once", c.method, c.target, got, c.want)
		}
	}
}
