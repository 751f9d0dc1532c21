package main

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/jobqueue/jobqueue/internal/testdb"
)

// TestBasicAuthLetsHealthThrough: `web`'s basic auth lets GET and HEAD of
// the dashboard's health check through without credentials, at
// /api/health and under --prefix, so that a load balancer's or
// Kubernetes' probe reaches it (its answer is only "ok" or
// "unavailable"); every other path and method still needs them. It asked
// the probes for a password too, which they do not carry.
func TestBasicAuthLetsHealthThrough(t *testing.T) {
	served := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusTeapot) })
	cases := []struct {
		prefix, method, path string
		code                 int
	}{
		{"", "GET", "/api/health", http.StatusTeapot},
		{"", "HEAD", "/api/health", http.StatusTeapot},
		{"/queue", "GET", "/queue/api/health", http.StatusTeapot},
		{"/queue", "GET", "/api/health", http.StatusTeapot}, // the dashboard answers without the prefix too
		{"", "POST", "/api/health", http.StatusUnauthorized},
		{"", "GET", "/api/health/", http.StatusUnauthorized},
		{"", "GET", "/api//health", http.StatusUnauthorized},
		{"", "GET", "/api/stats", http.StatusUnauthorized},
		{"", "GET", "/metrics", http.StatusUnauthorized},
		{"", "GET", "/queue/api/health", http.StatusUnauthorized},
		{"/queue", "GET", "/other/api/health", http.StatusUnauthorized},
	}
	for _, c := range cases {
		h := basicAuth(served, "alice", "s3cret", c.prefix, testdb.QuietLogger())
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(c.method, c.path, nil))
		if w.Code != c.code {
			t.Errorf("prefix %q: %s %s without credentials = %d; want %d", c.prefix, c.method, c.path, w.Code, c.code)
		}
	}
}
