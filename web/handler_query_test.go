package web_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/jobqueue/jobqueue/internal/testdb"
	"github.com/jobqueue/jobqueue/web"
)

// TestMalformedQueryIs400: a query string that does not parse (a bad
// escape, a semicolon) is refused with 400 saying so, by the API as JSON
// and by the jobs page. It was read as far as it parsed and the rest
// dropped: /api/jobs?status=%zz listed every job, as if no filter had been
// given, and a page of them offered to delete them.
func TestMalformedQueryIs400(t *testing.T) {
	testdb.ForEachEngine(t, func(t *testing.T, e *testdb.Env) {
		q := newQueue(t, e)
		if _, err := q.Enqueue(context.Background(), cleanup{}); err != nil {
			t.Fatal(err)
		}
		h := web.NewHandler(q, web.Options{Logger: testdb.QuietLogger()})
		cases := []struct {
			target string
			json   bool // an API route, answering JSON
		}{
			{"/api/jobs?status=%zz", true},
			{"/api/jobs?status=failed&limit=%zz", true},
			{"/api/jobs?status=failed;limit=1", true},
			{"/api/stats?type=%zz", true},
			{"/jobs?status=%zz", false},
			{"/jobs?status=failed;type=x", false},
		}
		for _, c := range cases {
			code, body := call(t, h, "GET", c.target, "")
			if code != http.StatusBadRequest {
				t.Errorf("GET %s = %d; want 400:\n%s", c.target, code, body)
				continue
			}
			msg := body
			if c.json {
				msg = decode[map[string]string](t, body)["error"]
			}
			if !strings.Contains(msg, "malformed query") {
				t.Errorf("GET %s: the answer does not say the query is malformed:\n%s", c.target, body)
			}
		}
	})
}
