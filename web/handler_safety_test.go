package web_test

import (
	"context"
	"errors"
	"fmt"
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

func basic(user, pass string) string {
	r := httptest.NewRequest("GET", "/", nil)
	r.SetBasicAuth(user, pass)
	return r.Header.Get("Authorization")
}

// TestSafety checks read-only mode, Authorize and cross-origin refusal;
// nothing they refuse changes the table.
func TestSafety(t *testing.T) {
	testdb.ForEachEngine(t, func(t *testing.T, e *testdb.Env) {
		q := newQueue(t, e)
		s := seed(t, q)
		retryBody := fmt.Sprintf(`{"ids":[%d]}`, s.failed[0])
		posts := []struct{ path, body string }{
			{"/api/jobs/retry", retryBody},
			{"/api/jobs/cancel", retryBody},
			{"/api/jobs/delete", retryBody},
			{"/api/maintenance/expire", ""},
			{"/api/maintenance/reclaim", ""},
			{"/api/maintenance/prune", `{"older_than":"0s"}`},
		}
		unchanged := func(t *testing.T) {
			t.Helper()
			st, err := q.Stats(context.Background(), "")
			if err != nil {
				t.Fatal(err)
			}
			want := map[queue.Status]int64{queue.StatusPending: 3, queue.StatusInProgress: 0, queue.StatusCompleted: 1, queue.StatusFailed: 2, queue.StatusExpired: 1}
			if diff := cmp.Diff(want, st); diff != "" {
				t.Fatalf("the table changed (-want +got):\n%s", diff)
			}
		}

		t.Run("read-only", func(t *testing.T) {
			h := web.NewHandler(q, web.Options{ReadOnly: true, Logger: testdb.QuietLogger()})
			for _, p := range posts {
				code, body := call(t, h, "POST", p.path, p.body)
				if code != 403 || !strings.Contains(decode[map[string]string](t, body)["error"], "read-only") {
					t.Fatalf("read-only POST %s = %d %s, want 403", p.path, code, body)
				}
			}
			unchanged(t)
			for _, page := range []string{"/", "/jobs", fmt.Sprintf("/jobs/%d", s.failed[0])} {
				code, body := call(t, h, "GET", page, "")
				if code != 200 {
					t.Fatalf("read-only GET %s = %d", page, code)
				}
				for _, button := range []string{"data-action", "data-maint", `class="pick"`, "<dialog", `id="confirm-ok"`, `class="danger"`} {
					if strings.Contains(body, button) {
						t.Fatalf("read-only page %s has an action (%s)", page, button)
					}
				}
				if !strings.Contains(body, "read-only") {
					t.Fatalf("read-only page %s does not say so", page)
				}
			}
			// The pages of a writable dashboard do have the buttons.
			code, body := call(t, web.NewHandler(q, web.Options{}), "GET", fmt.Sprintf("/jobs/%d", s.failed[0]), "")
			if code != 200 || !strings.Contains(body, `data-action="retry"`) || !strings.Contains(body, `data-action="delete"`) || !strings.Contains(body, `<dialog id="confirm"`) {
				t.Fatalf("writable job page = %d, lacks its buttons or the delete confirmation", code)
			}
		})

		t.Run("authorize", func(t *testing.T) {
			var seen []web.Action
			var mu sync.Mutex
			h := web.NewHandler(q, web.Options{Logger: testdb.QuietLogger(),
				Authorize: func(r *http.Request, a web.Action) error {
					mu.Lock()
					seen = append(seen, a)
					mu.Unlock()
					if r.Header.Get("X-Role") == "viewer" && a != web.ActionView {
						return errors.New("viewers cannot change jobs")
					}
					if r.Header.Get("X-Role") == "" {
						return errors.New("log in first")
					}
					return nil
				}})
			for _, p := range posts {
				code, body := call(t, h, "POST", p.path, p.body, "X-Role", "viewer")
				if code != 403 || !strings.Contains(body, "viewers cannot change jobs") {
					t.Fatalf("viewer POST %s = %d %s, want 403", p.path, code, body)
				}
			}
			unchanged(t)
			if code, _ := call(t, h, "GET", "/api/stats", "", "X-Role", "viewer"); code != 200 {
				t.Fatalf("viewer GET /api/stats = %d, want 200", code)
			}
			for _, target := range []string{"/api/stats", "/", "/jobs"} {
				if code, _ := call(t, h, "GET", target, ""); code != 403 {
					t.Fatalf("anonymous GET %s = %d, want 403", target, code)
				}
			}
			mu.Lock()
			defer mu.Unlock()
			want := []web.Action{web.ActionRetry, web.ActionCancel, web.ActionDelete, web.ActionExpire, web.ActionReclaim, web.ActionPrune}
			if diff := cmp.Diff(want, seen[:len(want)]); diff != "" {
				t.Fatalf("actions asked of Authorize (-want +got):\n%s", diff)
			}
		})

		t.Run("cross-origin", func(t *testing.T) {
			h := web.NewHandler(q, web.Options{Logger: testdb.QuietLogger()})
			headers := [][]string{
				{"Sec-Fetch-Site", "cross-site"},
				{"Origin", "https://evil.example"},
			}
			for _, hd := range headers {
				code, body := call(t, h, "POST", "/api/jobs/retry", retryBody, hd...)
				if code != 403 || !strings.Contains(body, "cross-origin") {
					t.Fatalf("POST with %v = %d %s, want 403", hd, code, body)
				}
			}
			unchanged(t)
			// The same request from the dashboard's own origin goes through.
			code, body := call(t, h, "POST", "/api/jobs/retry", retryBody, "Sec-Fetch-Site", "same-origin")
			if code != 200 || !decode[results](t, body).Results[0].OK {
				t.Fatalf("same-origin retry = %d %s", code, body)
			}
		})
	})
}
