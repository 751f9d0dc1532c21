package web_test

import (
	"context"
	"fmt"
	"html"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/testdb"
	"github.com/jobqueue/jobqueue/queue"
	"github.com/jobqueue/jobqueue/web"
)

// TestFiltersNoJobCanHave: a type or name filter that no job can hold
// (jobtext.Problem, the rule enqueues and the CLI's --type and --name
// go by: not UTF-8, a NUL, a trailing space, too long) is refused with a
// 400 that says why, on every route that filters and every engine, the
// name as the type. Only a type or name too long was refused; the other
// texts answered 200 with no jobs (a name of bytes that are not UTF-8
// looked like a kind with no jobs, where the CLI says no job can have it),
// and before that PostgreSQL's refusal of them was a 500. An empty
// parameter is no filter.
func TestFiltersNoJobCanHave(t *testing.T) {
	testdb.ForEachEngine(t, func(t *testing.T, e *testdb.Env) {
		q := newQueue(t, e)
		if _, err := q.Enqueue(context.Background(), cleanup{}); err != nil {
			t.Fatal(err)
		}
		h := web.NewHandler(q, web.Options{Logger: testdb.QuietLogger()})
		long := func(n int) string { return strings.Repeat("%C3%A9", n) } // é
		cases := []struct {
			target string
			code   int
			says   string // a part of the 400's error; for 200, how many jobs
		}{
			{"/api/jobs?name=%ff", 400, `name "\xff" is not valid UTF-8, so no job has it`},
			{"/api/jobs?type=%ff", 400, `type "\xff" is not valid UTF-8, so no job has it`},
			{"/api/jobs?type=%00", 400, "type \"\\x00\" contains a NUL character"},
			{"/api/jobs?name=a%00b", 400, "name \"a\\x00b\" contains a NUL character"},
			{"/api/jobs?type=default%20", 400, "ends with a space"},
			{"/api/jobs?name=cleanup%20", 400, "ends with a space"},
			{"/api/jobs?name=" + long(256), 400, "has 256 characters; at most 255 are allowed"},
			{"/api/jobs?type=" + long(65), 400, "has 65 characters; at most 64 are allowed"},
			{"/api/stats?type=%ff", 400, "not valid UTF-8"},
			{"/api/stats?type=a%00", 400, "contains a NUL character"},
			{"/jobs?name=a%00b", 400, "contains a NUL character"},
			{"/jobs?type=%ff", 400, "not valid UTF-8"},
			{"/api/jobs?name=cleanup", 200, "1"},
			{"/api/jobs?name=&type=", 200, "1"},
			{"/api/jobs?name=" + long(255) + "&type=" + long(64), 200, "0"},
			{"/api/stats?type=", 200, ""},
		}
		for _, c := range cases {
			code, body := call(t, h, "GET", c.target, "")
			ok := code == c.code
			switch {
			case code != 200 && strings.HasPrefix(c.target, "/api/"):
				ok = ok && strings.Contains(decode[map[string]string](t, body)["error"], c.says)
			case code != 200:
				ok = ok && strings.Contains(html.UnescapeString(body), c.says)
			case strings.HasPrefix(c.target, "/api/jobs"):
				ok = ok && fmt.Sprint(len(decode[jobsPage](t, body).Jobs)) == c.says
			}
			if !ok {
				t.Errorf("GET %.60s = %d %.300s; want %d, %q", c.target, code, body, c.code, c.says)
			}
		}
	})
}

// TestRetryRefusedForItsKey: a job whose unique key another live job has
// taken gets a result of its own (not ok, with the reason); the ids before
// and after it are retried, and the log names them. The refusal used to
// fail the whole request with 500, after retrying the ids before it
// unlogged and leaving the ids after it untried.
func TestRetryRefusedForItsKey(t *testing.T) {
	testdb.ForEachEngine(t, func(t *testing.T, e *testdb.Env) {
		q := newQueue(t, e)
		ctx := context.Background()
		enqueue := func(args queue.JobArgs, opts ...queue.EnqueueOption) int64 {
			t.Helper()
			id, err := q.Enqueue(ctx, args, opts...)
			if err != nil {
				t.Fatal(err)
			}
			return id
		}
		keyed := enqueue(sendEmail{To: "a@example.com"}, queue.UniqueKey("k"))
		before := enqueue(resizeImage{Path: "/1"})
		after := enqueue(resizeImage{Path: "/2"})
		if _, err := q.CancelMany(ctx, []int64{keyed, before, after}); err != nil { // all three failed
			t.Fatal(err)
		}
		holder := enqueue(sendEmail{To: "b@example.com"}, queue.UniqueKey("k")) // the key, free again
		logs := &logBuffer{}
		h := web.NewHandler(q, web.Options{Logger: slog.New(slog.NewTextHandler(logs, nil))})
		code, body := call(t, h, "POST", "/api/jobs/retry", fmt.Sprintf(`{"ids":[%d,%d,%d]}`, before, keyed, after))
		if code != http.StatusOK {
			t.Fatalf("retry = %d %s; want 200 with a result per id", code, body)
		}
		r := decode[results](t, body).Results
		if len(r) != 3 || !r[0].OK || r[1].OK || !r[2].OK {
			t.Fatalf("results = %+v; want ok, refused, ok", r)
		}
		if want := fmt.Sprintf("held by job %d", holder); !strings.Contains(r[1].Error, want) {
			t.Errorf("the refusal %q does not say %q", r[1].Error, want)
		}
		for _, id := range []int64{before, after} {
			if j, err := q.Get(ctx, id); err != nil || j.Status != queue.StatusPending {
				t.Errorf("job %d after the retry: %v, %v; want pending", id, j, err)
			}
		}
		if want := fmt.Sprintf("done=\"[%d %d]\"", before, after); !strings.Contains(logs.String(), want) {
			t.Errorf("log %q does not hold %s", logs.String(), want)
		}
	})
}

// TestBodyEndsWithTheObject: anything after the JSON object is refused
// with 400 and nothing is done, a stray } or ] included (json.Decoder's
// More does not count them, and such a delete went through).
func TestBodyEndsWithTheObject(t *testing.T) {
	testdb.ForEachEngine(t, func(t *testing.T, e *testdb.Env) {
		q := newQueue(t, e)
		ctx := context.Background()
		id, err := q.Enqueue(ctx, cleanup{})
		if err != nil {
			t.Fatal(err)
		}
		h := web.NewHandler(q, web.Options{Logger: testdb.QuietLogger()})
		for _, body := range []string{`{"ids":[%d]}}`, `{"ids":[%d]}]`, `{"ids":[%d]} {}`, `{"ids":[%d]} x`} {
			body = fmt.Sprintf(body, id)
			if code, resp := call(t, h, "POST", "/api/jobs/delete", body); code != http.StatusBadRequest {
				t.Errorf("POST /api/jobs/delete %s = %d %s; want 400", body, code, resp)
			}
		}
		if _, err := q.Get(ctx, id); err != nil {
			t.Fatalf("the job is gone: %v", err)
		}
		if code, resp := call(t, h, "POST", "/api/jobs/delete", fmt.Sprintf("{\"ids\":[%d]}\n \n", id)); code != http.StatusOK {
			t.Errorf("a body with white space after the object = %d %s; want 200", code, resp)
		}
	})
}

// TestPagingKeepsTheLimit: the jobs page's links (older, newest, the status
// chips and the filter form) keep a limit given in the URL, so that every
// page is as long as the first.
func TestPagingKeepsTheLimit(t *testing.T) {
	testdb.ForEachEngine(t, func(t *testing.T, e *testdb.Env) {
		q := newQueue(t, e)
		for range 6 {
			if _, err := q.Enqueue(context.Background(), cleanup{}); err != nil {
				t.Fatal(err)
			}
		}
		h := web.NewHandler(q, web.Options{Logger: testdb.QuietLogger()})
		_, first := call(t, h, "GET", "/jobs?limit=2", "")
		older := regexp.MustCompile(`id="older" href="([^"]+)"`).FindStringSubmatch(first)
		if older == nil {
			t.Fatalf("no older link:\n%s", first)
		}
		next := strings.ReplaceAll(older[1], "&amp;", "&")
		_, second := call(t, h, "GET", next, "")
		if n := strings.Count(second, `<tr data-id=`); n != 2 {
			t.Fatalf("/jobs?limit=2 links older to %s, which shows %d jobs; want 2", next, n)
		}
		for _, want := range []string{`<input type="hidden" name="limit" value="2">`, `limit=2&amp;status=pending`} {
			if !strings.Contains(second, "limit=2") || !strings.Contains(second, want) {
				t.Errorf("the second page does not hold %s", want)
			}
		}
		_, plain := call(t, h, "GET", "/jobs", "")
		if strings.Contains(plain, "limit=") {
			t.Errorf("the default page size is spelled in the links of /jobs")
		}
	})
}

// TestWrongMethodIs405: an API route asked with another method answers 405
// with an Allow header naming the route's method, not 404 (or, for GET of
// an action route, 400 "bad job id").
func TestWrongMethodIs405(t *testing.T) {
	testdb.ForEachEngine(t, func(t *testing.T, e *testdb.Env) {
		q := newQueue(t, e)
		h := web.NewHandler(q, web.Options{Logger: testdb.QuietLogger()})
		cases := []struct{ method, target, allow string }{
			{"PUT", "/api/jobs/retry", "POST"},
			{"GET", "/api/jobs/retry", "POST"},
			{"GET", "/api/maintenance/prune", "POST"},
			{"POST", "/api/stats", "GET"},
			{"DELETE", "/api/jobs/1", "GET"},
		}
		for _, c := range cases {
			r := httptest.NewRequest(c.method, c.target, nil)
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if w.Code != http.StatusMethodNotAllowed || w.Header().Get("Allow") != c.allow {
				t.Errorf("%s %s = %d, Allow %q, %s; want 405, Allow %q", c.method, c.target, w.Code, w.Header().Get("Allow"), strings.TrimSpace(w.Body.String()), c.allow)
			}
		}
		if code, body := call(t, h, "GET", "/api/nothing", ""); code != http.StatusNotFound {
			t.Errorf("GET /api/nothing = %d %s; want 404", code, body)
		}
	})
}

// TestActionRepeatedID: an id given twice in one action request gets the
// same result twice, for retry as for cancel and delete (queue.CancelMany
// and DeleteMany answer so). Retry was tried again for the repeated id,
// which found the job pending by then and answered "only failed or
// expired jobs can be retried" for a job the request had just retried.
func TestActionRepeatedID(t *testing.T) {
	testdb.ForEachEngine(t, func(t *testing.T, e *testdb.Env) {
		q := newQueue(t, e)
		ctx := context.Background()
		h := web.NewHandler(q, web.Options{Logger: testdb.QuietLogger()})
		for _, action := range []string{"retry", "cancel", "delete"} {
			t.Run(action, func(t *testing.T) {
				id, err := q.Enqueue(ctx, sendEmail{To: action + "@example.com"})
				if err != nil {
					t.Fatal(err)
				}
				if action == "retry" {
					if err := q.Cancel(ctx, id); err != nil { // failed: retry runs it again
						t.Fatal(err)
					}
				}
				missing := id + 1<<40
				code, body := call(t, h, "POST", "/api/jobs/"+action, fmt.Sprintf(`{"ids":[%d,%d,%d,%d]}`, id, missing, id, missing))
				if code != http.StatusOK {
					t.Fatalf("%s = %d %s", action, code, body)
				}
				r := decode[results](t, body).Results
				if len(r) != 4 || !r[0].OK || r[0] != r[2] || r[1].OK || r[1] != r[3] {
					t.Fatalf("%s of ids %d, %d, %d, %d = %+v; want ok twice and the same refusal twice", action, id, missing, id, missing, r)
				}
			})
		}
	})
}

// TestPruneAgeAsTheCLI: prune's older_than takes what `jobqueue prune
// --older-than` takes, whole days included ("30d" was refused with 400
// while the CLI and its README example take it), and refuses the same
// ages with the same reason.
func TestPruneAgeAsTheCLI(t *testing.T) {
	e := testdb.New(t, engine.SQLite)
	q := newQueue(t, e)
	ctx := context.Background()
	id, err := q.Enqueue(ctx, cleanup{})
	if err != nil {
		t.Fatal(err)
	}
	if err := q.Cancel(ctx, id); err != nil { // finished now
		t.Fatal(err)
	}
	h := web.NewHandler(q, web.Options{Logger: testdb.QuietLogger()})
	cases := []struct {
		age   string
		code  int
		count int64  // jobs pruned, when 200
		says  string // the error, when 400
	}{
		{"30d", http.StatusOK, 0, ""},
		{"720h", http.StatusOK, 0, ""},
		{"-1d", http.StatusBadRequest, 0, "must not be negative"},
		{"200000d", http.StatusBadRequest, 0, "too long"},
		{"a month", http.StatusBadRequest, 0, "not a duration"},
		{"0d", http.StatusOK, 1, ""},
	}
	for _, c := range cases {
		code, body := call(t, h, "POST", "/api/maintenance/prune", fmt.Sprintf(`{"older_than":%q}`, c.age))
		if code != c.code {
			t.Fatalf("prune older than %q = %d %s; want %d", c.age, code, body, c.code)
		}
		if code == http.StatusOK {
			if n := decode[map[string]int64](t, body)["count"]; n != c.count {
				t.Errorf("prune older than %q pruned %d jobs; want %d", c.age, n, c.count)
			}
			continue
		}
		if msg := decode[map[string]string](t, body)["error"]; !strings.Contains(msg, "bad older_than") || !strings.Contains(msg, c.says) {
			t.Errorf("prune older than %q: error %q; want it to say %q", c.age, msg, c.says)
		}
	}
}
