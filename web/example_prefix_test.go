package web_test

import (
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"regexp"

	"github.com/jobqueue/jobqueue/web"
)

// With Options.Prefix the dashboard is mounted under a path without
// http.StripPrefix (or behind a proxy that cuts the path off): its links,
// scripts and styles start with the prefix.
func ExampleNewHandler_prefix() {
	q, done := exampleQueue()
	defer done()
	mux := http.NewServeMux()
	mux.Handle("/ops/queue/", web.NewHandler(q, web.Options{Prefix: "/ops/queue"}))
	srv := httptest.NewServer(mux)
	defer srv.Close()

	show(srv, "GET", "/ops/queue/api/stats", "")
	w := httptest.NewRecorder()
	mux.ServeHTTP(w, httptest.NewRequest("GET", "/ops/queue/jobs", nil))
	for _, link := range regexp.MustCompile(`(?:href|src|action)="([^"]+)"`).FindAllStringSubmatch(w.Body.String(), 6) {
		fmt.Println(link[1])
	}
	if w.Code != http.StatusOK {
		log.Fatalf("GET /ops/queue/jobs = %d", w.Code)
	}
	// Output:
	// GET /ops/queue/api/stats 200 {"pending":0,"in_progress":0,"completed":0,"failed":0,"expired":0}
	// /ops/queue/static/app.css
	// /ops/queue/static/app.js
	// /ops/queue/
	// /ops/queue/
	// /ops/queue/jobs
	// /ops/queue/jobs
}
