package web_test

import (
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/testdb"
	"github.com/jobqueue/jobqueue/web"
)

// TestBrowserRunsNoJobText: in chromium, a job whose kind, type, payload
// and error are markup runs none of it, neither on a page's load nor after
// the live refresh has swapped the page's content in (which parses the
// fetched page and sets its HTML).
func TestBrowserRunsNoJobText(t *testing.T) {
	e := testdb.New(t, engine.SQLite)
	q := newQueue(t, e)
	id := failedMarkupJob(t, q)
	srv := httptest.NewServer(web.NewHandler(q, web.Options{Logger: testdb.QuietLogger()}))
	t.Cleanup(srv.Close)
	bctx := browser(t)
	do(t, bctx, "open the overview", chromedp.Navigate(srv.URL+"/"), chromedp.WaitVisible(".cards"))
	eval[bool](t, bctx, `localStorage.setItem("jobqueue.refresh", "2") || true`)
	for _, page := range []string{"/", "/jobs", fmt.Sprintf("/jobs/%d", id)} {
		do(t, bctx, "open "+page, chromedp.Navigate(srv.URL+page), chromedp.WaitVisible("#content"))
		if got := eval[string](t, bctx, `document.querySelector("#content").textContent`); !strings.Contains(got, "window.__pwned='error'") {
			t.Errorf("%s does not show the job's error as text", page)
		}
		eval[bool](t, bctx, `(document.querySelector("#content").firstElementChild.dataset.stale = "1") && true`)
		waitJS(t, bctx, page+" refreshes", `!document.querySelector("#content").firstElementChild.dataset.stale`)
		if got := eval[string](t, bctx, `String(window.__pwned)`); got != "undefined" {
			t.Fatalf("%s ran the job's %s as markup", page, got)
		}
	}
}
