//go:build unix

package main

import (
	"net/http"
	"strings"
	"testing"
)

// TestWebPrefixMetrics: `web --prefix /queue` serves /metrics under the
// prefix, where a proxy that passes on only /queue/… can reach it, and at
// the root as without --prefix, where scrape configs already point. It
// was served at the root only: /queue/metrics got the dashboard's 404.
func TestWebPrefixMetrics(t *testing.T) {
	t.Parallel()
	c := sqliteCLI(t)
	c.ok(t, "install")
	c.ok(t, "enqueue", "--name", "hello")
	base, _ := startWeb(t, c, nil, "--addr", "127.0.0.1:0", "--prefix", "/queue")
	for _, path := range []string{"/queue/metrics", "/metrics"} {
		series, code := scrape(t, base+path)
		if code != http.StatusOK {
			t.Errorf("GET %s = %d, want 200", path, code)
			continue
		}
		found := false
		for name := range series {
			found = found || strings.HasPrefix(name, "jobqueue_jobs{")
		}
		if !found {
			t.Errorf("GET %s has no jobqueue_jobs series: %v", path, series)
		}
	}
}
