package web_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/testdb"
	"github.com/jobqueue/jobqueue/queue"
	"github.com/jobqueue/jobqueue/web"
)

// TestBrowserUnderAPrefix drives the dashboard in headless chromium
// mounted under /admin/queue/, with http.StripPrefix and with
// Options.Prefix: its style and script load, the status chips, the job
// links and the actions' API calls stay under the prefix, and a confirmed
// delete returns to the prefix's jobs page.
func TestBrowserUnderAPrefix(t *testing.T) {
	e := testdb.New(t, engine.SQLite)
	q := newQueue(t, e)
	s := seed(t, q)
	ctx := context.Background()
	opts := web.Options{Logger: testdb.QuietLogger()}
	strip := http.NewServeMux()
	strip.Handle("/admin/queue/", http.StripPrefix("/admin/queue", web.NewHandler(q, opts)))
	opts.Prefix = "/admin/queue"
	option := http.NewServeMux()
	option.Handle("/admin/queue/", web.NewHandler(q, opts))
	bctx := browser(t)
	mounts := []struct {
		name   string
		mux    http.Handler
		failed int64 // the job this mount retries, then deletes
	}{
		{"StripPrefix", strip, s.failed[0]},
		{"Options.Prefix", option, s.failed[1]},
	}
	for _, m := range mounts {
		srv := httptest.NewServer(m.mux)
		t.Cleanup(srv.Close)
		root := srv.URL + "/admin/queue"
		do(t, bctx, m.name+": open the overview", chromedp.Navigate(root+"/"), chromedp.WaitVisible(".cards"))
		// Live refresh off (each server is an origin of its own).
		eval[bool](t, bctx, `localStorage.setItem("jobqueue.refresh", "0") || true`)
		do(t, bctx, m.name+": reload", chromedp.Reload(), chromedp.WaitVisible(".cards"))
		if n := eval[int](t, bctx, `[...document.styleSheets].reduce((n, s) => n + s.cssRules.length, 0)`); n == 0 {
			t.Errorf("%s: the overview has no style rules: app.css did not load", m.name)
		}
		do(t, bctx, m.name+": follow the failed card", chromedp.Click(`.card[data-status="failed"]`))
		waitJS(t, bctx, m.name+": the failed jobs are listed under the prefix",
			`location.pathname === "/admin/queue/jobs" && location.search === "?status=failed" && document.querySelector('tr[data-id]')`)

		// The script runs: a selection counts, and its retry goes through.
		do(t, bctx, m.name+": select a job", chromedp.Click(fmt.Sprintf(`input.pick[value="%d"]`, m.failed)))
		waitJS(t, bctx, m.name+": the selection counts", `document.querySelector("#selcount").textContent === "1 selected"`)
		do(t, bctx, m.name+": retry it", chromedp.Click(`#bulk button[data-action="retry"]`))
		waitJS(t, bctx, m.name+": the page says it was retried", `document.querySelector("#flash").textContent.startsWith("1 of 1 job retried")`)
		if j, err := q.Get(ctx, m.failed); err != nil || j.Status != queue.StatusPending {
			t.Fatalf("%s: retried job = %+v, %v; want pending", m.name, j, err)
		}

		// The job's page, and a confirmed delete back to the jobs page.
		do(t, bctx, m.name+": open the job", chromedp.Navigate(fmt.Sprintf("%s/jobs?type=images", root)), chromedp.WaitVisible("table.jobs"),
			chromedp.Click(fmt.Sprintf(`tr[data-id="%d"] td.name a`, m.failed)), chromedp.WaitVisible("#job-status"))
		if got := eval[string](t, bctx, `location.pathname`); got != fmt.Sprintf("/admin/queue/jobs/%d", m.failed) {
			t.Fatalf("%s: the job's link went to %s", m.name, got)
		}
		do(t, bctx, m.name+": cancel it", chromedp.Click(`button[data-action="cancel"]`))
		waitJS(t, bctx, m.name+": the job shows failed", `document.querySelector("#job-status").textContent.trim() === "failed"`)
		do(t, bctx, m.name+": delete it, then confirm", chromedp.Click(`button[data-action="delete"]`), chromedp.WaitVisible("#confirm"), chromedp.Click("#confirm-ok"))
		waitJS(t, bctx, m.name+": the prefix's jobs page opens", `location.pathname === "/admin/queue/jobs"`)
		if _, err := q.Get(ctx, m.failed); !errors.Is(err, queue.ErrJobNotFound) {
			t.Fatalf("%s: the deleted job: %v; want it gone", m.name, err)
		}
	}
}
