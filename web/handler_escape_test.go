package web_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jobqueue/jobqueue/internal/testdb"
	"github.com/jobqueue/jobqueue/queue"
	"github.com/jobqueue/jobqueue/web"
)

// markup is a job whose kind, type, payload and error are HTML that sets
// window.__pwned if a page ever lets it through as markup.
type markup struct {
	Note string `json:"note"`
}

func (markup) Kind() string { return `<img src=x onerror="window.__pwned='kind'">` }

const (
	markupType  = `"><svg onload="window.__pwned='type'">`
	markupNote  = `</pre><script>window.__pwned='payload'</script>`
	markupError = `<img src=x onerror="window.__pwned='error'"></pre>`
)

// failedMarkupJob enqueues a markup job and fails it for good through a
// worker, so that its error is markup too.
func failedMarkupJob(t testing.TB, q *queue.Queue) int64 {
	t.Helper()
	ctx := context.Background()
	id, err := q.Enqueue(ctx, markup{Note: markupNote}, queue.Type(markupType),
		queue.Policy(queue.RetryPolicy{MaxAttempts: 1, BaseDelay: time.Second, MaxDelay: time.Second}))
	if err != nil {
		t.Fatal(err)
	}
	w := q.NewWorker(queue.WorkerConfig{Types: []string{markupType}, Concurrency: 1, MaxJobs: 1,
		PollInterval: 50 * time.Millisecond, MaintenanceInterval: -1})
	queue.Handle(w, func(ctx context.Context, j *queue.Job[markup]) error { return errors.New(markupError) })
	rctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if err := w.Run(rctx); err != nil {
		t.Fatalf("worker: %v", err)
	}
	if j, err := q.Get(ctx, id); err != nil || j.Status != queue.StatusFailed {
		t.Fatalf("the markup job = %+v, %v; want failed", j, err)
	}
	return id
}

// TestPagesEscapeJobText: a job's kind, type, payload and error, shown on
// every page and in every API answer that shows them, come out as text,
// never as markup (html/template in the pages, JSON with <, > and &
// escaped in the API).
func TestPagesEscapeJobText(t *testing.T) {
	testdb.ForEachEngine(t, func(t *testing.T, e *testdb.Env) {
		q := newQueue(t, e)
		id := failedMarkupJob(t, q)
		h := web.NewHandler(q, web.Options{Logger: testdb.QuietLogger()})
		cases := []struct {
			target string
			shows  []string // the texts the answer must show, escaped
		}{
			{"/", []string{"kind", "type", "error"}},
			{"/jobs", []string{"kind", "type", "error"}},
			{"/jobs?status=failed&type=" + url.QueryEscape(markupType), []string{"kind", "type", "error"}},
			{fmt.Sprintf("/jobs/%d", id), []string{"kind", "type", "error", "payload"}},
			{"/api/jobs", []string{"kind", "type", "error", "payload"}},
			{fmt.Sprintf("/api/jobs/%d", id), []string{"kind", "type", "error", "payload"}},
			{"/api/overview", []string{"kind", "type", "error", "payload"}},
		}
		for _, c := range cases {
			code, body := call(t, h, "GET", c.target, "")
			if code != 200 {
				t.Fatalf("GET %s = %d:\n%s", c.target, code, body)
			}
			for _, raw := range []string{"<img src=x", "<svg onload", "<script>window", "</pre><script>"} {
				if strings.Contains(body, raw) {
					t.Errorf("GET %s lets %s through unescaped", c.target, raw)
				}
			}
			for _, what := range c.shows {
				text := "window.__pwned=&#39;" + what + "&#39;" // in HTML
				if strings.HasPrefix(c.target, "/api/") {
					text = "window.__pwned='" + what + "'" // in JSON
				}
				if !strings.Contains(body, text) {
					t.Errorf("GET %s does not show the job's %s as text (%s)", c.target, what, text)
				}
			}
		}
	})
}
