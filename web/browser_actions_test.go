package web_test

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/testdb"
	"github.com/jobqueue/jobqueue/queue"
	"github.com/jobqueue/jobqueue/web"
)

// TestBrowserBulkAndMaintenance drives in headless chromium what
// TestBrowser leaves out: a delete of a selection asks first (keeping it
// changes nothing, confirming deletes every selected job), the overview's
// expire and reclaim buttons run and say how many jobs they ended, and
// prune, which deletes jobs too, asks first as a delete does (it used to
// delete every finished job at the press of the button).
func TestBrowserBulkAndMaintenance(t *testing.T) {
	e := testdb.New(t, engine.SQLite)
	q := newQueue(t, e)
	s := seed(t, q)
	ctx := context.Background()
	now := time.Now().UTC()
	overdue, err := q.Enqueue(ctx, cleanup{}, queue.Type("maintenance"), queue.At(now.Add(-2*time.Hour)), queue.ExpiresAt(now.Add(-time.Hour)))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(web.NewHandler(q, web.Options{Logger: testdb.QuietLogger()}))
	t.Cleanup(srv.Close)
	bctx := browser(t)
	stats := func() map[queue.Status]int64 {
		t.Helper()
		st, err := q.Stats(ctx, "")
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	flash := func(what, want string) {
		t.Helper()
		waitJS(t, bctx, what, fmt.Sprintf(`!document.querySelector("#flash").hidden && document.querySelector("#flash").textContent.startsWith(%q)`, want))
	}

	// A delete of a selection asks first.
	do(t, bctx, "open the overview", chromedp.Navigate(srv.URL+"/"), chromedp.WaitVisible(".cards"))
	eval[bool](t, bctx, `localStorage.setItem("jobqueue.refresh", "0") || true`)
	do(t, bctx, "list the email jobs", chromedp.Navigate(srv.URL+"/jobs?type=email"), chromedp.WaitVisible("table.jobs"))
	for _, id := range s.pending[:2] {
		do(t, bctx, "select a job", chromedp.Click(fmt.Sprintf(`input.pick[value="%d"]`, id)))
	}
	do(t, bctx, "delete the selection, then keep", chromedp.Click(`#bulk button[data-action="delete"]`), chromedp.WaitVisible("#confirm"))
	if got := eval[string](t, bctx, `document.querySelector("#confirm-text").textContent`); got != "Delete 2 jobs? This cannot be undone." {
		t.Errorf("the dialog asks %q", got)
	}
	do(t, bctx, "keep", chromedp.Click("#confirm-cancel"))
	waitJS(t, bctx, "the dialog closes", `!document.querySelector("#confirm").open`)
	if st := stats(); st[queue.StatusPending] != 4 {
		t.Fatalf("pending jobs after keeping = %d, want 4 (nothing deleted)", st[queue.StatusPending])
	}
	do(t, bctx, "delete the selection, then confirm", chromedp.Click(`#bulk button[data-action="delete"]`), chromedp.WaitVisible("#confirm"), chromedp.Click("#confirm-ok"))
	flash("the page says both were deleted", "2 of 2 jobs deleted")
	for _, id := range s.pending[:2] {
		if _, err := q.Get(ctx, id); !errors.Is(err, queue.ErrJobNotFound) {
			t.Errorf("selected job %d after the confirmed delete: %v; want it gone", id, err)
		}
	}
	waitJS(t, bctx, "the deleted jobs leave the page", fmt.Sprintf(`!document.querySelector('tr[data-id="%d"]') && !document.querySelector('tr[data-id="%d"]')`, s.pending[0], s.pending[1]))

	// Expire and reclaim run from the overview and say how many. Each
	// action refreshes the page after it ran: the next step waits for the
	// fresh content (which lacks the mark put on the old one).
	do(t, bctx, "open the overview", chromedp.Navigate(srv.URL+"/"), chromedp.WaitVisible("#maintenance"))
	maint := func(what, selector, want string) {
		t.Helper()
		eval[bool](t, bctx, `(document.querySelector("#maintenance").dataset.stale = "1") && true`)
		do(t, bctx, what, chromedp.Click(selector))
		flash("the page says "+want, want)
		waitJS(t, bctx, "the page refreshes", `document.querySelector("#maintenance") && !document.querySelector("#maintenance").dataset.stale`)
	}
	maint("press expire", `button[data-maint="expire"]`, "1 overdue jobs expired")
	if j, err := q.Get(ctx, overdue); err != nil || j.Status != queue.StatusExpired {
		t.Fatalf("overdue job after expire = %+v, %v; want expired", j, err)
	}
	maint("press reclaim", `button[data-maint="reclaim"]`, "0 abandoned attempts reclaimed")

	// Prune asks first: keeping it deletes nothing; confirming prunes.
	finished := func() int64 {
		st := stats()
		return st[queue.StatusCompleted] + st[queue.StatusFailed] + st[queue.StatusExpired]
	}
	before := finished()
	if before != 5 {
		t.Fatalf("%d finished jobs before prune, want 5", before)
	}
	do(t, bctx, "prune everything finished, then keep",
		chromedp.SetValue(`form.prune input[name="older_than"]`, "0s"),
		chromedp.Click(`form.prune button[type="submit"]`))
	waitJS(t, bctx, "a dialog opens or the prune ran", `document.querySelector("#confirm").open || document.querySelector("#flash").textContent.includes("pruned")`)
	if !eval[bool](t, bctx, `document.querySelector("#confirm").open`) {
		t.Fatalf("prune ran without asking: the page says %q; %d finished jobs left of %d",
			eval[string](t, bctx, `document.querySelector("#flash").textContent`), finished(), before)
	}
	if got := eval[string](t, bctx, `document.querySelector("#confirm-ok").textContent`); got != "Prune" {
		t.Errorf("the dialog's button says %q, want Prune", got)
	}
	do(t, bctx, "keep", chromedp.Click("#confirm-cancel"))
	waitJS(t, bctx, "the dialog closes", `!document.querySelector("#confirm").open`)
	if n := finished(); n != before {
		t.Fatalf("%d finished jobs after keeping, want %d (nothing pruned)", n, before)
	}
	do(t, bctx, "prune, then confirm", chromedp.Click(`form.prune button[type="submit"]`), chromedp.WaitVisible("#confirm"), chromedp.Click("#confirm-ok"))
	flash("the page says the jobs were pruned", fmt.Sprintf("%d finished jobs pruned", before))
	if n := finished(); n != 0 {
		t.Fatalf("%d finished jobs after the confirmed prune, want 0", n)
	}
	if st := stats(); st[queue.StatusPending] != 1 {
		t.Fatalf("pending jobs after prune = %d, want 1 (prune keeps them)", st[queue.StatusPending])
	}
}
