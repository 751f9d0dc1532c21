package web_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/jobqueue/jobqueue/internal/testdb"
	"github.com/jobqueue/jobqueue/web"
)

// TestPages checks the HTML pages: what they show, escaping, hidden
// payloads, errors and links under a prefix.
func TestPages(t *testing.T) {
	testdb.ForEachEngine(t, func(t *testing.T, e *testdb.Env) {
		q := newQueue(t, e)
		s := seed(t, q)
		h := web.NewHandler(q, web.Options{Logger: testdb.QuietLogger()})
		cases := []struct {
			name, target string
			code         int
			has, hasNot  []string
		}{
			{"overview", "/", 200, []string{`data-count="3"`, `data-count="2"`, `data-type="images"`, "cannot open /img/dog.png", "Oldest due job", `data-maint="prune"`}, nil},
			{"jobs", "/jobs", 200, []string{fmt.Sprintf(`data-id="%d"`, s.expired), fmt.Sprintf(`data-id="%d"`, s.pending[0])}, []string{"older →"}},
			{"failed jobs", "/jobs?status=failed", 200, []string{fmt.Sprintf(`data-id="%d"`, s.failed[0]), `data-action="retry"`}, []string{fmt.Sprintf(`data-id="%d"`, s.pending[0])}},
			{"paged", "/jobs?limit=2", 200, []string{fmt.Sprintf(`after_id=%d`, s.completed), "older →"}, nil},
			{"escaped", fmt.Sprintf("/jobs/%d", s.pending[1]), 200, []string{"Invoice ", "send_email", "grace@example.com"}, []string{"<42>"}},
			{"job", fmt.Sprintf("/jobs/%d", s.failed[0]), 200, []string{"Job #", "&#34;width&#34;: 640", "no such file or directory", "enqueued", `data-action="retry"`, `data-action="delete"`}, []string{`data-action="cancel"`}},
			{"bad status", "/jobs?status=bogus", 400, []string{"unknown status"}, nil},
			{"bad limit", "/jobs?limit=-1", 400, []string{"bad limit"}, nil},
			{"missing job", "/jobs/987654321", 404, []string{"There is no job 987654321"}, nil},
			{"bad id", "/jobs/x", 400, []string{"bad job id"}, nil},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				code, body := call(t, h, "GET", c.target, "")
				if code != c.code {
					t.Fatalf("GET %s = %d, want %d:\n%s", c.target, code, c.code, body)
				}
				for _, s := range c.has {
					if !strings.Contains(body, s) {
						t.Errorf("GET %s lacks %q", c.target, s)
					}
				}
				for _, s := range c.hasNot {
					if strings.Contains(body, s) {
						t.Errorf("GET %s has %q", c.target, s)
					}
				}
			})
		}

		t.Run("capped counts", func(t *testing.T) {
			hc := web.NewHandler(q, web.Options{CountLimit: 2, Logger: testdb.QuietLogger()})
			code, body := call(t, hc, "GET", "/", "")
			// 3 pending emails count as "2+", the 2 failed images as "2+",
			// the one completed report as "1".
			if code != 200 || !strings.Contains(body, `data-count="2">2&#43;</span>`) || !strings.Contains(body, `data-count="1">1</span>`) {
				t.Fatalf("overview with CountLimit 2 = %d, lacks the capped counts:\n%s", code, body)
			}
			_, body = call(t, hc, "GET", "/api/overview", "")
			ov := decode[struct {
				Totals stats    `json:"totals"`
				Capped []string `json:"totals_capped"`
			}](t, body)
			if ov.Totals != (stats{Pending: 2, Completed: 1, Failed: 2, Expired: 1}) || fmt.Sprint(ov.Capped) != "[pending failed]" {
				t.Fatalf("capped overview = %+v", ov)
			}
		})

		t.Run("hidden payloads", func(t *testing.T) {
			hh := web.NewHandler(q, web.Options{HidePayloads: true, Logger: testdb.QuietLogger()})
			for _, target := range []string{fmt.Sprintf("/jobs/%d", s.failed[0]), fmt.Sprintf("/api/jobs/%d", s.failed[0]), "/api/jobs", "/api/overview"} {
				code, body := call(t, hh, "GET", target, "")
				// The payload's keys, as JSON or as escaped HTML.
				if code != 200 || strings.Contains(body, `"width"`) || strings.Contains(body, "&#34;width&#34;") {
					t.Fatalf("GET %s with hidden payloads = %d and shows the payload:\n%s", target, code, body)
				}
			}
			_, body := call(t, hh, "GET", fmt.Sprintf("/api/jobs/%d", s.failed[0]), "")
			if decode[map[string]any](t, body)["payload"] != nil {
				t.Fatalf("hidden payload is not null: %s", body)
			}
		})

		t.Run("prefix", func(t *testing.T) {
			mux := http.NewServeMux()
			mux.Handle("/admin/queue/", http.StripPrefix("/admin/queue", h))
			code, body := call(t, mux, "GET", "/admin/queue/jobs?status=failed", "")
			if code != 200 {
				t.Fatalf("GET under a prefix = %d", code)
			}
			for _, link := range []string{`href="/admin/queue/static/app.css"`, fmt.Sprintf(`href="/admin/queue/jobs/%d"`, s.failed[0]), `data-base="/admin/queue"`} {
				if !strings.Contains(body, link) {
					t.Errorf("page under a prefix lacks %s", link)
				}
			}
			if code, _ := call(t, mux, "GET", "/admin/queue/static/app.js", ""); code != 200 {
				t.Fatalf("GET the script under a prefix = %d", code)
			}
		})
	})
}
