//go:build unix

package main

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestWebSecurityHeadersBesideDashboard: what `jobqueue web` answers
// beside the dashboard's handler (/metrics, at the root and under
// --prefix, and basic auth's 401) carries the same security headers as a
// dashboard page, with the same values, once each. Only the dashboard's
// answers had them: /metrics and the 401s went without nosniff, framing
// refusal and content security policy.
func TestWebSecurityHeadersBesideDashboard(t *testing.T) {
	t.Parallel()
	c := sqliteCLI(t)
	c.ok(t, "install")
	base, _ := startWeb(t, c, []string{envWebUser + "=alice", envWebPassword + "=s3cret"},
		"--addr", "127.0.0.1:0", "--prefix", "/queue")
	get := func(t *testing.T, path string, auth bool) *http.Response {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, base+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if auth {
			req.SetBasicAuth("alice", "s3cret")
		}
		resp, err := (&http.Client{Timeout: 20 * time.Second}).Do(req)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		if err := resp.Body.Close(); err != nil {
			t.Fatalf("GET %s: close the body: %v", path, err)
		}
		return resp
	}
	page := get(t, "/queue/jobs", true)
	if page.StatusCode != http.StatusOK {
		t.Fatalf("GET /queue/jobs = %d; want 200", page.StatusCode)
	}
	names := []string{"X-Content-Type-Options", "X-Frame-Options", "Content-Security-Policy"}
	for _, name := range names {
		if v := page.Header.Values(name); len(v) != 1 || v[0] == "" {
			t.Fatalf("the dashboard's page has %s %q; want one value", name, v)
		}
	}
	cases := []struct {
		name, path string
		auth       bool
		code       int
	}{
		{"metrics", "/metrics", true, http.StatusOK},
		{"metrics under the prefix", "/queue/metrics", true, http.StatusOK},
		{"metrics without credentials", "/metrics", false, http.StatusUnauthorized},
		{"a page without credentials", "/queue/jobs", false, http.StatusUnauthorized},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			resp := get(t, c.path, c.auth)
			if resp.StatusCode != c.code {
				t.Fatalf("GET %s = %d; want %d", c.path, resp.StatusCode, c.code)
			}
			for _, name := range names {
				want := page.Header.Get(name)
				if got := resp.Header.Values(name); len(got) != 1 || got[0] != want {
					t.Errorf("GET %s: %s is %q; want %q once, as on the dashboard's pages", c.path, name, strings.Join(got, " | "), want)
				}
			}
		})
	}
}
