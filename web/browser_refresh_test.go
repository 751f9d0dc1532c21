package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"strings"
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

// TestBrowserRefreshFollowsPage: when a live refresh turns the page into
// another kind of page (a job's page becomes the 404 page once the job is
// deleted), the document's title, the navigation's current link and the
// refresh picker follow the new page, as a fresh load of the URL shows
// them. The refresh swapped only #content, so the tab went on saying
// "Job N" over a "Not found" heading.
func TestBrowserRefreshFollowsPage(t *testing.T) {
	e := testdb.New(t, engine.SQLite)
	q := newQueue(t, e)
	s := seed(t, q)
	srv := httptest.NewServer(web.NewHandler(q, web.Options{Logger: testdb.QuietLogger()}))
	t.Cleanup(srv.Close)
	ctx := browser(t)
	id := s.pending[0]
	url := fmt.Sprintf("%s/jobs/%d", srv.URL, id)
	do(t, ctx, "open the job", chromedp.Navigate(url), chromedp.WaitVisible(".jobhead"))
	// A long interval: the one refresh below is the only one.
	eval[bool](t, ctx, `localStorage.setItem("jobqueue.refresh", "60") || true`)
	do(t, ctx, "open the job again", chromedp.Navigate(url), chromedp.WaitVisible(".jobhead"))
	if title := eval[string](t, ctx, `document.title`); !strings.HasPrefix(title, fmt.Sprintf("Job %d ", id)) {
		t.Fatalf("the job's page has the title %q", title)
	}

	if err := q.Delete(context.Background(), id); err != nil {
		t.Fatalf("delete job %d: %v", id, err)
	}
	if fetched := eval[[]string](t, ctx, refreshFetches); len(fetched) != 1 {
		t.Fatalf("the refresh fetched %q; want the page's URL once", fetched)
	}
	waitJS(t, ctx, "the refresh swaps in the 404 page", `document.querySelector("#content").dataset.page === "message"`)

	// What a fresh load of the URL shows, read from the server's answer.
	state := `JSON.stringify({
		title: document.title,
		heading: document.querySelector("#content h1").textContent.trim(),
		current: Array.from(document.querySelectorAll("header nav a.active, header nav a[aria-current]")).map(a => a.textContent),
		pickerDisabled: document.querySelector("#refresh").disabled,
		noRefresh: document.body.hasAttribute("data-no-refresh"),
	})`
	refreshed := eval[string](t, ctx, state)
	do(t, ctx, "load the 404 page afresh", chromedp.Navigate(url), chromedp.WaitVisible("#message"))
	loaded := eval[string](t, ctx, state)
	var got, want map[string]any
	for _, c := range []struct {
		what, text string
		into       *map[string]any
	}{{"refreshed", refreshed, &got}, {"loaded", loaded, &want}} {
		if err := json.Unmarshal([]byte(c.text), c.into); err != nil {
			t.Fatalf("%s page state %q: %v", c.what, c.text, err)
		}
	}
	cases := []struct{ name, key string }{
		{"the document's title", "title"},
		{"the heading", "heading"},
		{"the navigation's current link", "current"},
		{"the refresh picker's state", "pickerDisabled"},
		{"whether the page refreshes", "noRefresh"},
	}
	for _, c := range cases {
		if g, w := fmt.Sprint(got[c.key]), fmt.Sprint(want[c.key]); g != w {
			t.Errorf("%s after the refresh: %s; a fresh load of the 404 page has %s", c.name, g, w)
		}
	}
	if h := fmt.Sprint(want["heading"]); h != "Not found" || !strings.HasPrefix(fmt.Sprint(want["title"]), "Not found ") {
		t.Errorf("a fresh load of a deleted job's page has the heading %q and the title %q; want Not found", h, want["title"])
	}
}
