package web_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/jobqueue/jobqueue/internal/testdb"
	"github.com/jobqueue/jobqueue/queue"
	"github.com/jobqueue/jobqueue/web"
)

// call sends one request to h and returns the response's code and body.
func call(t *testing.T, h http.Handler, method, target, body string, hdr ...string) (int, string) {
	t.Helper()
	var r *http.Request
	if body != "" {
		r = httptest.NewRequest(method, target, strings.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
	} else {
		r = httptest.NewRequest(method, target, nil)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		r.Header.Set(hdr[i], hdr[i+1])
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w.Code, w.Body.String()
}

// decode parses a JSON body, failing the test when it is not JSON.
func decode[T any](t *testing.T, body string) T {
	t.Helper()
	var v T
	if err := json.Unmarshal([]byte(body), &v); err != nil {
		t.Fatalf("body is not the JSON expected (%v): %s", err, body)
	}
	return v
}

type stats struct {
	Pending    int64 `json:"pending"`
	InProgress int64 `json:"in_progress"`
	Completed  int64 `json:"completed"`
	Failed     int64 `json:"failed"`
	Expired    int64 `json:"expired"`
}

type jobJSON struct {
	ID      int64           `json:"id"`
	Name    string          `json:"name"`
	Type    string          `json:"type"`
	Status  string          `json:"status"`
	Payload json.RawMessage `json:"payload"`
	Error   *string         `json:"error"`
}

type jobsPage struct {
	Jobs        []jobJSON `json:"jobs"`
	NextAfterID *int64    `json:"next_after_id"`
}

type results struct {
	Results []struct {
		ID    int64  `json:"id"`
		OK    bool   `json:"ok"`
		Error string `json:"error"`
	} `json:"results"`
}

func ids(js []jobJSON) []int64 {
	out := []int64{}
	for _, j := range js {
		out = append(out, j.ID)
	}
	return out
}

// logBuffer collects log lines for assertions.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

func TestAPI(t *testing.T) {
	testdb.ForEachEngine(t, func(t *testing.T, e *testdb.Env) {
		q := newQueue(t, e)
		s := seed(t, q)
		logs := &logBuffer{}
		h := web.NewHandler(q, web.Options{Logger: slog.New(slog.NewTextHandler(logs, nil))})
		all := []int64{s.expired, s.completed, s.failed[1], s.failed[0], s.pending[2], s.pending[1], s.pending[0]}

		t.Run("health", func(t *testing.T) {
			code, body := call(t, h, "GET", "/api/health", "")
			if code != 200 || decode[map[string]string](t, body)["status"] != "ok" {
				t.Fatalf("GET /api/health = %d %s", code, body)
			}
		})

		statsCases := []struct {
			name, target string
			want         stats
		}{
			{"all", "/api/stats", stats{Pending: 3, Completed: 1, Failed: 2, Expired: 1}},
			{"type", "/api/stats?type=email", stats{Pending: 3}},
			{"unknown type", "/api/stats?type=none", stats{}},
		}
		for _, c := range statsCases {
			t.Run("stats "+c.name, func(t *testing.T) {
				code, body := call(t, h, "GET", c.target, "")
				if code != 200 {
					t.Fatalf("GET %s = %d %s", c.target, code, body)
				}
				if diff := cmp.Diff(c.want, decode[stats](t, body)); diff != "" {
					t.Fatalf("GET %s (-want +got):\n%s", c.target, diff)
				}
				if !strings.Contains(body, `"in_progress":0`) {
					t.Fatalf("stats lack a key: %s", body)
				}
			})
		}

		t.Run("overview", func(t *testing.T) {
			code, body := call(t, h, "GET", "/api/overview", "")
			if code != 200 {
				t.Fatalf("GET /api/overview = %d %s", code, body)
			}
			ov := decode[struct {
				Totals stats `json:"totals"`
				Types  []struct {
					Type   string `json:"type"`
					Counts stats  `json:"counts"`
				} `json:"types"`
				OldestDue *struct {
					ID int64 `json:"id"`
				} `json:"oldest_due"`
				RecentFailures []jobJSON `json:"recent_failures"`
			}](t, body)
			if diff := cmp.Diff(stats{Pending: 3, Completed: 1, Failed: 2, Expired: 1}, ov.Totals); diff != "" {
				t.Fatalf("totals (-want +got):\n%s", diff)
			}
			var types []string
			for _, ty := range ov.Types {
				types = append(types, ty.Type)
			}
			if diff := cmp.Diff([]string{"email", "images", "maintenance", "reports"}, types); diff != "" {
				t.Fatalf("types (-want +got):\n%s", diff)
			}
			if ov.Types[1].Counts != (stats{Failed: 2}) {
				t.Fatalf("images counts = %+v", ov.Types[1].Counts)
			}
			if ov.OldestDue == nil || ov.OldestDue.ID != s.pending[0] {
				t.Fatalf("oldest due = %+v, want job %d", ov.OldestDue, s.pending[0])
			}
			if diff := cmp.Diff([]int64{s.failed[1], s.failed[0]}, ids(ov.RecentFailures)); diff != "" {
				t.Fatalf("recent failures (-want +got):\n%s", diff)
			}
		})

		listCases := []struct {
			name, target string
			want         []int64
			next         bool
		}{
			{"all", "/api/jobs", all, false},
			{"failed", "/api/jobs?status=failed", []int64{s.failed[1], s.failed[0]}, false},
			{"type", "/api/jobs?type=email", []int64{s.pending[2], s.pending[1], s.pending[0]}, false},
			{"status and type", "/api/jobs?status=pending&type=images", []int64{}, false},
			{"first page", "/api/jobs?limit=3", all[:3], true},
			{"exact page", "/api/jobs?limit=7", all, false},
			{"second page", fmt.Sprintf("/api/jobs?limit=3&after_id=%d", all[2]), all[3:6], true},
			{"last page", fmt.Sprintf("/api/jobs?limit=3&after_id=%d", all[5]), all[6:], false},
			{"name", "/api/jobs?name=resize_image", []int64{s.failed[1], s.failed[0]}, false},
			{"name and status", "/api/jobs?name=send_email&status=failed", []int64{}, false},
		}
		for _, c := range listCases {
			t.Run("list "+c.name, func(t *testing.T) {
				code, body := call(t, h, "GET", c.target, "")
				if code != 200 {
					t.Fatalf("GET %s = %d %s", c.target, code, body)
				}
				page := decode[jobsPage](t, body)
				if diff := cmp.Diff(c.want, ids(page.Jobs)); diff != "" {
					t.Fatalf("GET %s ids (-want +got):\n%s", c.target, diff)
				}
				if (page.NextAfterID != nil) != c.next {
					t.Fatalf("GET %s next_after_id = %v, want one: %v", c.target, page.NextAfterID, c.next)
				}
				if c.next && *page.NextAfterID != c.want[len(c.want)-1] {
					t.Fatalf("next_after_id = %d, want the last id %d", *page.NextAfterID, c.want[len(c.want)-1])
				}
			})
		}

		t.Run("job", func(t *testing.T) {
			code, body := call(t, h, "GET", fmt.Sprintf("/api/jobs/%d", s.failed[0]), "")
			if code != 200 {
				t.Fatalf("GET job = %d %s", code, body)
			}
			j := decode[jobJSON](t, body)
			if j.ID != s.failed[0] || j.Status != "failed" || j.Name != "resize_image" || j.Error == nil ||
				!strings.Contains(*j.Error, "cannot open /img/cat.png") {
				t.Fatalf("job = %+v", j)
			}
			if diff := cmp.Diff(`{"path":"/img/cat.png","width":640}`, compact(t, j.Payload)); diff != "" {
				t.Fatalf("payload (-want +got):\n%s", diff)
			}
		})

		badCases := []struct {
			name, method, target, body string
			code                       int
			msg                        string
		}{
			{"unknown status", "GET", "/api/jobs?status=bogus", "", 400, "unknown status"},
			{"limit zero", "GET", "/api/jobs?limit=0", "", 400, "bad limit"},
			{"limit too big", "GET", "/api/jobs?limit=1001", "", 400, "bad limit"},
			{"limit not a number", "GET", "/api/jobs?limit=ten", "", 400, "bad limit"},
			{"after_id negative", "GET", "/api/jobs?after_id=-3", "", 400, "bad after_id"},
			{"after_id not a number", "GET", "/api/jobs?after_id=x", "", 400, "bad after_id"},
			{"long type", "GET", "/api/jobs?type=" + strings.Repeat("t", 65), "", 400, "type"},
			{"long type in stats", "GET", "/api/stats?type=" + strings.Repeat("t", 65), "", 400, "type"},
			{"long name", "GET", "/api/jobs?name=" + strings.Repeat("n", 256), "", 400, "name"},
			{"bad id", "GET", "/api/jobs/abc", "", 400, "bad job id"},
			{"zero id", "GET", "/api/jobs/0", "", 400, "bad job id"},
			{"huge id", "GET", "/api/jobs/99999999999999999999", "", 400, "bad job id"},
			{"missing job", "GET", "/api/jobs/987654321", "", 404, "no job 987654321"},
			{"unknown route", "GET", "/api/nothing", "", 404, "no API route"},
			{"malformed body", "POST", "/api/jobs/retry", `{"ids":[1,`, 400, "malformed JSON"},
			{"wrong type in body", "POST", "/api/jobs/retry", `{"ids":["1"]}`, 400, "malformed JSON"},
			{"unknown field", "POST", "/api/jobs/retry", `{"ids":[1],"force":true}`, 400, "unknown field"},
			{"trailing data", "POST", "/api/jobs/retry", `{"ids":[1]} {}`, 400, "data after"},
			{"empty body", "POST", "/api/jobs/cancel", "", 400, "body is empty"},
			{"no ids", "POST", "/api/jobs/delete", `{"ids":[]}`, 400, "no ids"},
			{"negative id", "POST", "/api/jobs/retry", `{"ids":[-1]}`, 400, "bad id -1"},
			{"too many ids", "POST", "/api/jobs/retry", `{"ids":[` + strings.Repeat("1,", 1000) + `1]}`, 400, "at most 1000"},
			{"prune without age", "POST", "/api/maintenance/prune", `{}`, 400, "bad older_than"},
			{"prune bad age", "POST", "/api/maintenance/prune", `{"older_than":"a month"}`, 400, "bad older_than"},
			{"prune negative age", "POST", "/api/maintenance/prune", `{"older_than":"-1h"}`, 400, "bad older_than"},
			{"expire with junk", "POST", "/api/maintenance/expire", `[1]`, 400, "malformed JSON"},
		}
		for _, c := range badCases {
			t.Run("bad "+c.name, func(t *testing.T) {
				code, body := call(t, h, c.method, c.target, c.body)
				if code != c.code {
					t.Fatalf("%s %s = %d %s, want %d", c.method, c.target, code, body, c.code)
				}
				msg := decode[map[string]string](t, body)["error"]
				if !strings.Contains(msg, c.msg) {
					t.Fatalf("%s %s error %q, want it to say %q", c.method, c.target, msg, c.msg)
				}
			})
		}
		// Nothing changed through the bad requests.
		if code, body := call(t, h, "GET", "/api/stats", ""); decode[stats](t, body) != (stats{Pending: 3, Completed: 1, Failed: 2, Expired: 1}) {
			t.Fatalf("stats after bad requests = %d %s", code, body)
		}

		t.Run("retry", func(t *testing.T) {
			body := fmt.Sprintf(`{"ids":[%d,%d,987654321]}`, s.failed[0], s.pending[0])
			code, resp := call(t, h, "POST", "/api/jobs/retry", body, "Authorization", basic("alice", "x"))
			if code != 200 {
				t.Fatalf("retry = %d %s", code, resp)
			}
			r := decode[results](t, resp)
			if len(r.Results) != 3 || !r.Results[0].OK || r.Results[1].OK || r.Results[2].OK ||
				!strings.Contains(r.Results[1].Error, "is pending") || !strings.Contains(r.Results[2].Error, "no job 987654321") {
				t.Fatalf("retry results = %+v", r)
			}
			if j, err := q.Get(context.Background(), s.failed[0]); err != nil || j.Status != queue.StatusPending {
				t.Fatalf("retried job = %+v, %v; want pending", j, err)
			}
			line := logs.String()
			if !strings.Contains(line, "user=alice") || !strings.Contains(line, "action=retry") ||
				!strings.Contains(line, fmt.Sprintf("ids=\"[%d %d 987654321]\"", s.failed[0], s.pending[0])) {
				t.Fatalf("the retry was not logged with who, what and ids:\n%s", line)
			}
		})

		// Cancel and delete through the API: a result per id, in order,
		// the reason for each one refused, the change in the table, and
		// who did it in the log.
		t.Run("cancel and delete", func(t *testing.T) {
			later, missing := s.pending[2], int64(987654321)
			cases := []struct {
				action string
				ids    []int64
				ok     []bool
				errs   []string // what each refused result says
				after  func(t *testing.T)
			}{
				{"cancel", []int64{later, s.completed, missing}, []bool{true, false, false},
					[]string{"", fmt.Sprintf("job %d is completed", s.completed), "not found"},
					func(t *testing.T) {
						if j, err := q.Get(context.Background(), later); err != nil || j.Status != queue.StatusFailed || j.Error != "cancelled" {
							t.Fatalf("cancelled job = %+v, %v; want failed, error cancelled", j, err)
						}
					}},
				{"delete", []int64{later, missing}, []bool{true, false},
					[]string{"", "not found"},
					func(t *testing.T) {
						if _, err := q.Get(context.Background(), later); !errors.Is(err, queue.ErrJobNotFound) {
							t.Fatalf("Get of the deleted job = %v; want ErrJobNotFound", err)
						}
					}},
			}
			for _, c := range cases {
				ids, _ := json.Marshal(c.ids)
				code, resp := call(t, h, "POST", "/api/jobs/"+c.action, `{"ids":`+string(ids)+`}`, "Authorization", basic("bob", "x"))
				if code != 200 {
					t.Fatalf("%s = %d %s", c.action, code, resp)
				}
				r := decode[results](t, resp)
				if len(r.Results) != len(c.ids) {
					t.Fatalf("%s: %d results for %d ids: %s", c.action, len(r.Results), len(c.ids), resp)
				}
				for i, res := range r.Results {
					if res.ID != c.ids[i] || res.OK != c.ok[i] || !strings.Contains(res.Error, c.errs[i]) || (res.OK && res.Error != "") {
						t.Errorf("%s result %d = %+v; want id %d ok %v, error saying %q", c.action, i, res, c.ids[i], c.ok[i], c.errs[i])
					}
				}
				c.after(t)
				if line := logs.String(); !strings.Contains(line, "user=bob") || !strings.Contains(line, "action="+c.action) {
					t.Fatalf("the %s was not logged with who and what:\n%s", c.action, line)
				}
			}
		})

		t.Run("maintenance", func(t *testing.T) {
			for _, op := range []string{"expire", "reclaim"} {
				code, body := call(t, h, "POST", "/api/maintenance/"+op, "")
				if code != 200 || decode[map[string]int64](t, body)["count"] != 0 {
					t.Fatalf("%s = %d %s, want count 0", op, code, body)
				}
			}
			// No job finished over an hour ago (Prune's rule is tested in
			// package queue).
			code, body := call(t, h, "POST", "/api/maintenance/prune", `{"older_than":"1h"}`)
			if code != 200 || decode[map[string]int64](t, body)["count"] != 0 {
				t.Fatalf("prune = %d %s, want count 0", code, body)
			}
			if !strings.Contains(logs.String(), "action=prune") {
				t.Fatalf("prune not logged:\n%s", logs.String())
			}
		})
	})
}

func compact(t *testing.T, b []byte) string {
	t.Helper()
	var buf bytes.Buffer
	if err := json.Compact(&buf, b); err != nil {
		t.Fatalf("not JSON: %s", b)
	}
	return buf.String()
}

// TestDatabaseFailures: when the queue cannot be read (here its table was
// dropped under the dashboard), the health check answers 503 and nothing
// more (anyone may ask it), the API 500 with the database's error as JSON,
// a page 500 with a sentence saying so; each failure is logged with the
// request.
func TestDatabaseFailures(t *testing.T) {
	testdb.ForEachEngine(t, func(t *testing.T, e *testdb.Env) {
		name := e.Table(t)
		q := newQueue(t, e, name)
		logs := &logBuffer{}
		h := web.NewHandler(q, web.Options{Logger: slog.New(slog.NewTextHandler(logs, nil))})
		if code, body := call(t, h, "GET", "/api/stats", ""); code != 200 {
			t.Fatalf("GET /api/stats before the drop = %d %s", code, body)
		}
		if _, err := e.DB.ExecContext(context.Background(), "DROP TABLE "+name); err != nil {
			t.Fatal(err)
		}
		cases := []struct {
			target string
			code   int
			says   string // what the body says
			names  bool   // whether it names the table (the database's error)
			logged string
		}{
			{"/api/health", 503, `"status":"unavailable"`, false, "health check failed"},
			{"/api/stats", 500, `"error":`, true, "path=/api/stats"},
			{"/api/jobs", 500, `"error":`, true, "path=/api/jobs"},
			{"/", 500, "the dashboard could not read the queue", true, "path=/"},
			{"/jobs", 500, "the dashboard could not read the queue", true, "path=/jobs"},
		}
		for _, c := range cases {
			code, body := call(t, h, "GET", c.target, "")
			names := strings.Contains(strings.ToLower(body), strings.ToLower(name))
			if code != c.code || !strings.Contains(body, c.says) || names != c.names {
				t.Errorf("GET %s with the table dropped = %d %s; want %d saying %q, naming %s: %v", c.target, code, body, c.code, c.says, name, c.names)
			}
			if !strings.Contains(logs.String(), c.logged) {
				t.Errorf("GET %s: the failure was not logged (%q):\n%s", c.target, c.logged, logs.String())
			}
		}
	})
}

// TestMaintenanceLoggedWhenItFails: a maintenance action that the database
// fails is logged as the action it was (who, which, its age for prune, the
// jobs it ended before the error), as a job action is. Only the request's
// failure was logged, without the action or how many jobs it had ended.
func TestMaintenanceLoggedWhenItFails(t *testing.T) {
	testdb.ForEachEngine(t, func(t *testing.T, e *testdb.Env) {
		name := e.Table(t)
		q := newQueue(t, e, name)
		logs := &logBuffer{}
		h := web.NewHandler(q, web.Options{Logger: slog.New(slog.NewTextHandler(logs, nil))})
		if _, err := e.DB.ExecContext(context.Background(), "DROP TABLE "+name); err != nil {
			t.Fatal(err)
		}
		cases := []struct {
			op, body string
			logged   []string
		}{
			{"expire", "", []string{"action=expire", "user=carol", "count=0", "err="}},
			{"reclaim", "", []string{"action=reclaim", "user=carol", "count=0", "err="}},
			{"prune", `{"older_than":"1h"}`, []string{"action=prune", "user=carol", "older_than=1h0m0s", "count=0", "err="}},
		}
		for _, c := range cases {
			code, body := call(t, h, "POST", "/api/maintenance/"+c.op, c.body, "Authorization", basic("carol", "x"))
			if code != http.StatusInternalServerError {
				t.Errorf("%s with the table dropped = %d %s; want 500", c.op, code, body)
			}
			var line string
			for _, l := range strings.Split(logs.String(), "\n") {
				if strings.Contains(l, "action="+c.op) {
					line = l
				}
			}
			for _, want := range c.logged {
				if !strings.Contains(line, want) {
					t.Errorf("the failed %s was not logged with %s:\n%s", c.op, want, logs.String())
				}
			}
		}
	})
}
