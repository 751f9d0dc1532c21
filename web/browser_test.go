package web_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/testdb"
	"github.com/jobqueue/jobqueue/queue"
	"github.com/jobqueue/jobqueue/web"
)

// chromium finds Debian's chromium (or $JOBQUEUE_CHROMIUM). Without one
// the browser tests fail in CI (.ci/run installs it) and skip elsewhere.
func chromium(t *testing.T) string {
	t.Helper()
	for _, p := range []string{os.Getenv("JOBQUEUE_CHROMIUM"), "/usr/bin/chromium", "chromium", "chromium-browser"} {
		if p == "" {
			continue
		}
		if path, err := exec.LookPath(p); err == nil {
			return path
		}
	}
	if testdb.Required() {
		t.Fatal("no chromium found: install it (apt-get install -y chromium) or set JOBQUEUE_CHROMIUM")
	}
	t.Skip("no chromium found; install it (apt-get install -y chromium) to run the browser tests")
	return ""
}

// browser starts a headless chromium for t and returns a tab's context.
func browser(t *testing.T) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium(t)),
		chromedp.NoSandbox, // CI runs as root
		chromedp.DisableGPU,
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 900),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelTab := chromedp.NewContext(actx)
	ctx, cancelTime := context.WithTimeout(ctx, 5*time.Minute)
	t.Cleanup(func() { cancelTime(); cancelTab(); cancelAlloc() })
	if err := chromedp.Do(ctx); err != nil { // starts the browser
		t.Fatalf("start chromium: %v", err)
	}
	return ctx
}

// do runs browser steps or fails the test, saying what it was doing.
func do(t *testing.T, ctx context.Context, what string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	start := time.Now()
	if err := chromedp.Do(ctx, steps...); err != nil {
		t.Fatalf("browser: %s: %v", what, err)
	}
	t.Logf("%s (%v)", what, time.Since(start).Round(time.Millisecond))
}

// eval evaluates a JavaScript expression in the page.
func eval[T any](t *testing.T, ctx context.Context, expr string) T {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("browser: evaluate %s: %v", expr, err)
	}
	return v
}

// waitJS polls until the expression is true in the page (an evaluation
// that fails while a page loads is tried again), for at most 60 seconds
// (the machine may be busy).
func waitJS(t *testing.T, ctx context.Context, what, expr string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	var last error
	for time.Now().Before(deadline) {
		ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool]("!!("+expr+")"))
		if err == nil && ok {
			return
		}
		last = err
		if ctx.Err() != nil {
			break
		}
		select {
		case <-ctx.Done():
		case <-time.After(50 * time.Millisecond):
		}
	}
	t.Fatalf("browser: waiting until %s: not true after 60s (last error: %v)", what, last)
}

// screenshot saves a PNG of the whole page into dir and logs its path.
func screenshot(t *testing.T, ctx context.Context, dir, name string) {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("browser: screenshot %s: %v", name, err)
	}
	path := filepath.Join(dir, name+".png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", path)
}

// TestBrowser drives the dashboard in headless chromium: it reads the
// overview's counts, filters failed jobs, opens one, retries it, selects
// two pending jobs and cancels them, deletes one with confirmation, sees
// live refresh and its pause in a hidden tab, and checks that read-only mode shows no actions and that
// the API refuses them.
func TestBrowser(t *testing.T) {
	e := testdb.New(t, engine.SQLite)
	q := newQueue(t, e)
	s := seed(t, q)
	srv := httptest.NewServer(web.NewHandler(q, web.Options{Logger: testdb.QuietLogger()}))
	t.Cleanup(srv.Close)
	ro := httptest.NewServer(web.NewHandler(q, web.Options{ReadOnly: true, Logger: testdb.QuietLogger()}))
	t.Cleanup(ro.Close)
	shots, err := os.MkdirTemp("", "jobqueue-web-screenshots-")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshots in %s", shots)
	ctx := browser(t)

	// Overview: the counts per status; live refresh off for the steps below.
	do(t, ctx, "open the overview", chromedp.Navigate(srv.URL+"/"), chromedp.WaitVisible(".cards"))
	eval[bool](t, ctx, `localStorage.setItem("jobqueue.refresh", "0") || true`)
	do(t, ctx, "reload", chromedp.Reload(), chromedp.WaitVisible(".cards"))
	counts := eval[map[string]string](t, ctx, `Object.fromEntries([...document.querySelectorAll(".card")].map(c => [c.dataset.status, c.querySelector(".n").textContent.trim()]))`)
	want := map[string]string{"pending": "3", "in_progress": "0", "completed": "1", "failed": "2", "expired": "1"}
	for k, v := range want {
		if counts[k] != v {
			t.Fatalf("overview counts = %v, want %v", counts, want)
		}
	}
	screenshot(t, ctx, shots, "overview")

	// Filter failed jobs with the form.
	do(t, ctx, "filter failed jobs",
		chromedp.Navigate(srv.URL+"/jobs"), chromedp.WaitVisible("form.filters"),
		chromedp.SetValue(`select[name="status"]`, "failed"),
		chromedp.Click(`form.filters button[type="submit"]`),
	)
	waitJS(t, ctx, "the failed jobs are listed", `location.search.includes("status=failed") && document.querySelectorAll("tr[data-id]").length === 2`)
	shown := eval[[]string](t, ctx, `[...document.querySelectorAll("tr[data-id]")].map(r => r.dataset.status)`)
	if fmt.Sprint(shown) != "[failed failed]" {
		t.Fatalf("failed filter shows %v", shown)
	}
	screenshot(t, ctx, shots, "jobs")

	// Open one and retry it: it is pending.
	do(t, ctx, "open a failed job", chromedp.Click(fmt.Sprintf(`tr[data-id="%d"] td.name a`, s.failed[0])), chromedp.WaitVisible("#job-status"))
	if got := eval[string](t, ctx, `document.querySelector("#job-status").textContent.trim()`); got != "failed" {
		t.Fatalf("job page status = %q, want failed", got)
	}
	screenshot(t, ctx, shots, "job")
	do(t, ctx, "press retry", chromedp.Click(`button[data-action="retry"]`))
	waitJS(t, ctx, "the job shows pending", `document.querySelector("#job-status").textContent.trim() === "pending"`)
	if j, err := q.Get(context.Background(), s.failed[0]); err != nil || j.Status != queue.StatusPending {
		t.Fatalf("retried job = %v, %v", j, err)
	}

	// Select two pending jobs and cancel them.
	do(t, ctx, "list pending jobs", chromedp.Navigate(srv.URL+"/jobs?status=pending"), chromedp.WaitVisible("table.jobs"))
	for _, id := range s.pending[:2] {
		do(t, ctx, "select a job", chromedp.Click(fmt.Sprintf(`input.pick[value="%d"]`, id)))
	}
	if got := eval[string](t, ctx, `document.querySelector("#selcount").textContent`); got != "2 selected" {
		t.Fatalf("selection count = %q", got)
	}
	do(t, ctx, "cancel the selection", chromedp.Click(`button[data-action="cancel"]`))
	waitJS(t, ctx, "the cancelled jobs leave the pending list", fmt.Sprintf(`!document.querySelector('tr[data-id="%d"]') && !document.querySelector('tr[data-id="%d"]')`, s.pending[0], s.pending[1]))
	for _, id := range s.pending[:2] {
		if j, err := q.Get(context.Background(), id); err != nil || j.Status != queue.StatusFailed || j.Error != "cancelled" {
			t.Fatalf("cancelled job %d = %+v, %v", id, j, err)
		}
	}

	// Delete asks first: keeping it changes nothing; confirming deletes.
	do(t, ctx, "open the completed job", chromedp.Navigate(fmt.Sprintf("%s/jobs/%d", srv.URL, s.completed)), chromedp.WaitVisible("#job-status"))
	do(t, ctx, "press delete, then keep", chromedp.Click(`button[data-action="delete"]`), chromedp.WaitVisible("#confirm"), chromedp.Click("#confirm-cancel"))
	waitJS(t, ctx, "the dialog closes", `!document.querySelector("#confirm").open`)
	if _, err := q.Get(context.Background(), s.completed); err != nil {
		t.Fatalf("the job was deleted without confirmation: %v", err)
	}
	do(t, ctx, "press delete, then confirm", chromedp.Click(`button[data-action="delete"]`), chromedp.WaitVisible("#confirm"), chromedp.Click("#confirm-ok"))
	waitJS(t, ctx, "the jobs page opens", `location.pathname === "/jobs"`)
	if _, err := q.Get(context.Background(), s.completed); err == nil {
		t.Fatal("the confirmed delete left the job")
	}

	// Live refresh: a new job shows up without a reload.
	do(t, ctx, "open the overview", chromedp.Navigate(srv.URL+"/"), chromedp.WaitVisible(".cards"))
	eval[bool](t, ctx, `(() => { const s = document.querySelector("#refresh"); s.value = "2"; s.dispatchEvent(new Event("change")); return true })()`)
	before := eval[string](t, ctx, `document.querySelector('.card[data-status="pending"] .n').textContent.trim()`)
	if _, err := q.Enqueue(context.Background(), sendEmail{To: "new@example.com"}, queue.Type("email")); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, "the refresh shows the new job", fmt.Sprintf(`document.querySelector('.card[data-status="pending"] .n').textContent.trim() !== %q`, before))
	// A hidden tab pauses the refresh (the page says so) and refreshes
	// at once when it is shown again.
	eval[bool](t, ctx, `(() => { Object.defineProperty(document, "hidden", {configurable: true, get: () => true}); document.dispatchEvent(new Event("visibilitychange")); return true })()`)
	waitJS(t, ctx, "the page says it is paused", `!document.querySelector("#paused").hidden`)
	before = eval[string](t, ctx, `document.querySelector('.card[data-status="pending"] .n').textContent.trim()`)
	if _, err := q.Enqueue(context.Background(), sendEmail{To: "later@example.com"}, queue.Type("email")); err != nil {
		t.Fatal(err)
	}
	eval[bool](t, ctx, `(() => { Object.defineProperty(document, "hidden", {configurable: true, get: () => false}); document.dispatchEvent(new Event("visibilitychange")); return true })()`)
	waitJS(t, ctx, "the shown tab refreshes", fmt.Sprintf(`document.querySelector('.card[data-status="pending"] .n').textContent.trim() !== %q && document.querySelector("#paused").hidden`, before))
	eval[bool](t, ctx, `(() => { const s = document.querySelector("#refresh"); s.value = "0"; s.dispatchEvent(new Event("change")); return true })()`)

	// Read-only: no action buttons, no (hidden) delete dialog, and the API refuses actions.
	for _, page := range []string{"/", "/jobs", fmt.Sprintf("/jobs/%d", s.failed[1])} {
		do(t, ctx, "open a read-only page "+page, chromedp.Navigate(ro.URL+page))
		do(t, ctx, "wait for it", chromedp.WaitVisible("#content"))
		if n := eval[int](t, ctx, `document.querySelectorAll("[data-action], [data-maint], input.pick, dialog, .danger").length`); n != 0 {
			t.Fatalf("read-only page %s shows %d action controls", page, n)
		}
	}
	status := eval[int](t, ctx, fmt.Sprintf(`fetch("/api/jobs/retry", {method: "POST", headers: {"Content-Type": "application/json"}, body: JSON.stringify({ids: [%d]})}).then(r => r.status)`, s.failed[1]))
	if status != 403 {
		t.Fatalf("read-only retry from the page = %d, want 403", status)
	}
	if j, err := q.Get(context.Background(), s.failed[1]); err != nil || j.Status != queue.StatusFailed {
		t.Fatalf("read-only retry changed job: %v, %v", j, err)
	}
}
