package web_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/jobqueue/jobqueue/internal/engine"
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

// TestFilterParametersExact: the routes that filter (GET /api/jobs, GET
// /api/stats and the jobs page) refuse with 400 a parameter they do not
// take, a name's case included, and one given twice, naming it: they
// were ignored, or the first value used, so /api/jobs?statu=failed or
// ?Status=failed listed every job as if no filter had been given, and a
// page of them offered to delete them.
func TestFilterParametersExact(t *testing.T) {
	e := testdb.New(t, engine.SQLite)
	q := newQueue(t, e)
	if _, err := q.Enqueue(context.Background(), cleanup{}); err != nil {
		t.Fatal(err)
	}
	h := web.NewHandler(q, web.Options{Logger: testdb.QuietLogger()})
	cases := []struct {
		target string
		code   int
		says   string
	}{
		{"/api/jobs?statu=failed", 400, `unknown parameter \"statu\"`},
		{"/api/jobs?Status=failed", 400, `unknown parameter \"Status\"`},
		{"/api/jobs?status=failed&status=pending", 400, `parameter \"status\" given twice`},
		{"/api/jobs?type=a&type=", 400, `parameter \"type\" given twice`},
		{"/api/jobs?after=5", 400, `unknown parameter \"after\"`},
		{"/api/stats?status=failed", 400, `unknown parameter \"status\"`},
		{"/api/stats?type=a&type=b", 400, `parameter \"type\" given twice`},
		{"/jobs?nam=cleanup", 400, `unknown parameter &#34;nam&#34;`},
		{"/jobs?name=a&name=cleanup", 400, `parameter &#34;name&#34; given twice`},
		{"/api/jobs?status=&type=&name=&limit=5&after_id=99", 200, `"jobs":`},
		{"/api/stats?type=", 200, `"pending":`},
		{"/jobs?status=pending&type=default&name=cleanup&limit=1", 200, `data-id=`},
	}
	for _, c := range cases {
		code, body := call(t, h, "GET", c.target, "")
		if code != c.code || !strings.Contains(body, c.says) {
			t.Errorf("GET %s = %d; want %d saying %s:\n%s", c.target, code, c.code, c.says, body)
		}
	}
}
