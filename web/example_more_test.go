package web_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/jobqueue/jobqueue/queue"
	"github.com/jobqueue/jobqueue/web"
)

// show sends one request to srv and prints the status and the body.
func show(srv *httptest.Server, method, path, body string, header ...string) {
	req, err := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
	if err != nil {
		log.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		log.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(method, path, resp.StatusCode, strings.TrimSpace(string(b)))
}

// The JSON API's actions: retry, cancel and delete take {"ids":[…]} and
// answer with a result per id; the maintenance routes run ExpireOverdue,
// Reclaim and Prune. A POST from another origin (a page of another site
// in the user's browser) is refused.
func ExampleNewHandler_actions() {
	q, done := exampleQueue()
	defer done()
	for _, to := range []string{"ada@example.com", "grace@example.com"} {
		if _, err := q.Enqueue(context.Background(), sendEmail{To: to}, queue.Type("email")); err != nil {
			log.Fatal(err)
		}
	}
	srv := httptest.NewServer(web.NewHandler(q, web.Options{}))
	defer srv.Close()

	show(srv, "POST", "/api/jobs/cancel", `{"ids":[1,7]}`)
	show(srv, "POST", "/api/jobs/retry", `{"ids":[1]}`)
	show(srv, "POST", "/api/maintenance/prune", `{"older_than":"720h"}`)
	show(srv, "GET", "/api/stats?type=email", "")
	show(srv, "POST", "/api/jobs/delete", `{"ids":[2]}`, "Sec-Fetch-Site", "cross-site")
	// Output:
	// POST /api/jobs/cancel 200 {"results":[{"id":1,"ok":true},{"id":7,"ok":false,"error":"job not found: no job 7 in table \"jobs\" (never enqueued there, or deleted or pruned since); check the id and the table"}]}
	// POST /api/jobs/retry 200 {"results":[{"id":1,"ok":true}]}
	// POST /api/maintenance/prune 200 {"count":0}
	// GET /api/stats?type=email 200 {"pending":2,"in_progress":0,"completed":0,"failed":0,"expired":0}
	// POST /api/jobs/delete 403 {"error":"cross-origin request refused: post from the dashboard's own pages"}
}

// ReadOnly serves the pages and the GET routes of the API, without the
// action buttons, and answers every mutating route with 403.
func ExampleNewHandler_readOnly() {
	q, done := exampleQueue()
	defer done()
	if _, err := q.Enqueue(context.Background(), sendEmail{To: "ada@example.com"}, queue.Type("email")); err != nil {
		log.Fatal(err)
	}
	srv := httptest.NewServer(web.NewHandler(q, web.Options{ReadOnly: true}))
	defer srv.Close()

	show(srv, "GET", "/api/health", "")
	show(srv, "GET", "/api/stats", "")
	show(srv, "POST", "/api/jobs/delete", `{"ids":[1]}`)
	show(srv, "POST", "/api/maintenance/expire", "")
	// Output:
	// GET /api/health 200 {"status":"ok"}
	// GET /api/stats 200 {"pending":1,"in_progress":0,"completed":0,"failed":0,"expired":0}
	// POST /api/jobs/delete 403 {"error":"the dashboard is read-only: actions are disabled"}
	// POST /api/maintenance/expire 403 {"error":"the dashboard is read-only: actions are disabled"}
}
