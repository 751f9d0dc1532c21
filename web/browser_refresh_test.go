package web_test

import (
	"net/http/httptest"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/testdb"
	"github.com/jobqueue/jobqueue/web"
)

// refreshFetches is a script that makes the page's live refresh run at
// once (as when a hidden tab is shown again) and answers the URLs it
// fetched: fetch is watched for that one synchronous call, so the answer
// needs no waiting.
const refreshFetches = `(() => {
	const seen = [], real = window.fetch;
	window.fetch = function (url) { seen.push(String(url)); return real.apply(this, arguments); };
	try { document.dispatchEvent(new Event("visibilitychange")); } finally { window.fetch = real; }
	return seen;
})()`

// TestBrowserPostPageNotRefreshed: a page that answered a POST (here the
// 405 page of a form posted to /jobs) is not refreshed, and its refresh
// picker says so (disabled), while a page reached with GET still is. The
// live refresh fetched the page's URL again with GET, so a few seconds
// after the 405 page showed, the jobs list took its place under the title
// "Method not allowed".
func TestBrowserPostPageNotRefreshed(t *testing.T) {
	e := testdb.New(t, engine.SQLite)
	q := newQueue(t, e)
	seed(t, q)
	srv := httptest.NewServer(web.NewHandler(q, web.Options{Logger: testdb.QuietLogger()}))
	t.Cleanup(srv.Close)
	ctx := browser(t)
	do(t, ctx, "open the overview", chromedp.Navigate(srv.URL+"/"), chromedp.WaitVisible(".cards"))
	eval[bool](t, ctx, `localStorage.setItem("jobqueue.refresh", "2") || true`)

	cases := []struct {
		name    string
		open    func()
		refresh bool
	}{
		{"a page reached with GET", func() {
			do(t, ctx, "open the jobs", chromedp.Navigate(srv.URL+"/jobs"), chromedp.WaitVisible("table.jobs"))
		}, true},
		{"the 405 page of a POST", func() {
			eval[bool](t, ctx, `(() => { const f = document.createElement("form"); f.method = "post"; f.action = "/jobs"; document.body.appendChild(f); f.submit(); return true })()`)
			waitJS(t, ctx, "the 405 page shows", `document.title.startsWith("Method not allowed") && document.querySelector("#message")`)
		}, false},
	}
	for _, c := range cases {
		c.open()
		fetched := eval[[]string](t, ctx, refreshFetches)
		disabled := eval[bool](t, ctx, `document.querySelector("#refresh").disabled`)
		if refreshes := len(fetched) > 0; refreshes != c.refresh || disabled == c.refresh {
			t.Errorf("%s: the refresh fetched %q, its picker disabled: %v; want a refresh: %v", c.name, fetched, disabled, c.refresh)
		}
	}
	if !eval[bool](t, ctx, `!!document.querySelector("#message") && document.querySelector("#content").dataset.page === "message"`) {
		t.Errorf("the 405 page's content was replaced: %s", eval[string](t, ctx, `document.querySelector("#content").innerText.slice(0, 200)`))
	}
}
