package web_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/testdb"
	"github.com/jobqueue/jobqueue/web"
)

// TestErrorPagesSayWhatHappened: a page that cannot be shown answers with
// the dashboard's message page, whose title and heading name what
// happened for its status (400, 403, 404, 405, 500), with links back to
// the overview. The message page was titled "Not found" whatever its
// status (a bad job id's 400 too) and had no heading; 403, 405 and 500
// were plain text, without the dashboard around them.
func TestErrorPagesSayWhatHappened(t *testing.T) {
	e := testdb.New(t, engine.SQLite)
	q := newQueue(t, e)
	plain := web.NewHandler(q, web.Options{Logger: testdb.QuietLogger()})
	refusing := web.NewHandler(q, web.Options{Logger: testdb.QuietLogger(), Authorize: func(*http.Request, web.Action) error {
		return errors.New("log in first")
	}})
	dropped := e.Table(t)
	qd := newQueue(t, e, dropped)
	broken := web.NewHandler(qd, web.Options{Logger: testdb.QuietLogger()})
	if _, err := e.DB.ExecContext(context.Background(), "DROP TABLE "+dropped); err != nil {
		t.Fatal(err)
	}
	title := regexp.MustCompile(`<title>([^<]*) · `)
	heading := regexp.MustCompile(`<h1[^>]*>([^<]*)</h1>`)
	cases := []struct {
		name           string
		h              http.Handler
		method, target string
		code           int
		what, says     string
	}{
		{"no such page", plain, "GET", "/nope", http.StatusNotFound, "Not found", "There is no page /nope"},
		{"no such job", plain, "GET", "/jobs/987654321", http.StatusNotFound, "Not found", "There is no job 987654321"},
		{"bad job id", plain, "GET", "/jobs/abc", http.StatusBadRequest, "Bad request", "bad job id &#34;abc&#34;"},
		{"page asked with POST", plain, "POST", "/jobs", http.StatusMethodNotAllowed, "Method not allowed", "POST /jobs takes GET, HEAD only"},
		{"not authorized", refusing, "GET", "/jobs", http.StatusForbidden, "Not authorized", "log in first"},
		{"queue unreadable", broken, "GET", "/", http.StatusInternalServerError, "Server error", "the dashboard could not read the queue"},
	}
	for _, c := range cases {
		w := httptest.NewRecorder()
		c.h.ServeHTTP(w, httptest.NewRequest(c.method, c.target, nil))
		body := w.Body.String()
		if w.Code != c.code || !strings.HasPrefix(w.Header().Get("Content-Type"), "text/html") {
			t.Errorf("%s: %s %s = %d %s; want %d, an HTML page:\n%s", c.name, c.method, c.target, w.Code, w.Header().Get("Content-Type"), c.code, body)
			continue
		}
		var gotTitle, gotHeading string
		if m := title.FindStringSubmatch(body); m != nil {
			gotTitle = m[1]
		}
		if m := heading.FindStringSubmatch(body); m != nil {
			gotHeading = m[1]
		}
		if gotTitle != c.what || gotHeading != c.what || !strings.Contains(body, c.says) || !strings.Contains(body, `href="/"`) {
			t.Errorf("%s: %s %s: title %q, heading %q; want both %q, the page saying %q with a link to the overview:\n%s",
				c.name, c.method, c.target, gotTitle, gotHeading, c.what, c.says, body)
		}
	}
}

// TestJobsPageBadFilterTitle: the jobs page refusing its filter (400)
// says so in its title, as the message page does by status; it was
// titled "Jobs" as if it listed them.
func TestJobsPageBadFilterTitle(t *testing.T) {
	e := testdb.New(t, engine.SQLite)
	q := newQueue(t, e)
	h := web.NewHandler(q, web.Options{Logger: testdb.QuietLogger()})
	title := regexp.MustCompile(`<title>([^<]*) · `)
	cases := []struct {
		target string
		code   int
		title  string
	}{
		{"/jobs?status=nope", http.StatusBadRequest, "Bad request: Jobs"},
		{"/jobs?limit=0", http.StatusBadRequest, "Bad request: Jobs"},
		{"/jobs?status=failed", http.StatusOK, "Jobs"},
	}
	for _, c := range cases {
		code, body := call(t, h, "GET", c.target, "")
		got := ""
		if m := title.FindStringSubmatch(body); m != nil {
			got = m[1]
		}
		if code != c.code || got != c.title {
			t.Errorf("GET %s = %d, title %q; want %d, title %q", c.target, code, got, c.code, c.title)
		}
	}
}
