package web_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/testdb"
	"github.com/jobqueue/jobqueue/web"
)

// TestRedirectsStayUnderThePrefix: the redirects the handler's router
// answers with (a path without its trailing slash, a path that is not
// clean) keep the prefix the dashboard is mounted under. They sent the
// browser to the root of the site: /admin/queue/api to /api/.
func TestRedirectsStayUnderThePrefix(t *testing.T) {
	e := testdb.New(t, engine.SQLite)
	q := newQueue(t, e)
	h := web.NewHandler(q, web.Options{Logger: testdb.QuietLogger()})
	mux := http.NewServeMux()
	mux.Handle("/admin/queue/", http.StripPrefix("/admin/queue", h))
	mounts := map[string]http.Handler{
		"mux":   mux,
		"strip": http.StripPrefix("/admin/queue", h), // no router in front to clean the path
		"root":  h,
	}
	cases := []struct{ mount, target, location string }{
		{"mux", "/admin/queue/api", "/admin/queue/api/"},
		{"mux", "/admin/queue/static", "/admin/queue/static/"},
		{"mux", "/admin/queue/static?v=1", "/admin/queue/static/?v=1"},
		{"strip", "/admin/queue/api", "/admin/queue/api/"},
		{"strip", "/admin/queue//jobs?status=failed", "/admin/queue/jobs?status=failed"},
		{"strip", "/admin/queue/jobs/../jobs", "/admin/queue/jobs"},
		{"root", "/api", "/api/"},
		{"root", "//jobs", "/jobs"},
	}
	for _, c := range cases {
		w := httptest.NewRecorder()
		mounts[c.mount].ServeHTTP(w, httptest.NewRequest("GET", c.target, nil))
		if w.Code < 300 || w.Code > 399 || w.Header().Get("Location") != c.location {
			t.Errorf("%s: GET %s = %d, Location %q; want a redirect to %s", c.mount, c.target, w.Code, w.Header().Get("Location"), c.location)
		}
	}
}

// TestPrefixOption: with Options.Prefix the dashboard works under that
// path mounted without http.StripPrefix (the handler cuts the prefix
// itself) and behind a proxy that cut it already: its pages link to its
// pages, scripts and styles under the prefix, its API answers there, and
// the prefix alone leads to the overview.
func TestPrefixOption(t *testing.T) {
	e := testdb.New(t, engine.SQLite)
	q := newQueue(t, e)
	s := seed(t, q)
	h := web.NewHandler(q, web.Options{Prefix: "/admin/queue/", Logger: testdb.QuietLogger()})
	mux := http.NewServeMux()
	mux.Handle("/admin/queue/", h)
	mounts := []struct {
		name  string
		h     http.Handler
		reqAt string // the path requests come with, the prefix or none
	}{
		{"mounted without StripPrefix", mux, "/admin/queue"},
		{"behind a proxy that cut the prefix", h, ""},
	}
	for _, m := range mounts {
		t.Run(m.name, func(t *testing.T) {
			code, body := call(t, m.h, "GET", m.reqAt+"/jobs?status=failed", "")
			if code != http.StatusOK {
				t.Fatalf("GET %s/jobs = %d:\n%s", m.reqAt, code, body)
			}
			for _, link := range []string{`href="/admin/queue/static/app.css"`, `src="/admin/queue/static/app.js"`,
				fmt.Sprintf(`href="/admin/queue/jobs/%d"`, s.failed[0]), `data-base="/admin/queue"`, `action="/admin/queue/jobs"`, `href="/admin/queue/"`} {
				if !strings.Contains(body, link) {
					t.Errorf("the jobs page lacks %s", link)
				}
			}
			for _, target := range []string{"/static/app.js", "/static/app.css", "/", fmt.Sprintf("/jobs/%d", s.failed[0]), "/api/stats"} {
				if code, body := call(t, m.h, "GET", m.reqAt+target, ""); code != http.StatusOK {
					t.Errorf("GET %s%s = %d:\n%s", m.reqAt, target, code, body)
				}
			}
			code, body = call(t, m.h, "POST", m.reqAt+"/api/jobs/retry", fmt.Sprintf(`{"ids":[%d]}`, s.failed[0]))
			if code != http.StatusOK || !strings.Contains(body, `"ok":true`) {
				t.Errorf("POST %s/api/jobs/retry = %d %s; want 200, ok", m.reqAt, code, body)
			}
			if _, err := q.CancelMany(context.Background(), []int64{s.failed[0]}); err != nil { // failed again, for the next mount
				t.Fatal(err)
			}
		})
	}
	w := httptest.NewRecorder()
	mux.ServeHTTP(w, httptest.NewRequest("GET", "/admin/queue", nil))
	if w.Code < 300 || w.Code > 399 || w.Header().Get("Location") != "/admin/queue/" {
		t.Errorf("GET /admin/queue = %d, Location %q; want a redirect to /admin/queue/", w.Code, w.Header().Get("Location"))
	}
}

// TestPrefixRefused: a prefix that is not a clean path, or that is or
// starts with one of the dashboard's own paths (/jobs, /api, /static), is
// refused by New with an error that says why, and NewHandler panics with
// it. A prefix /jobs made /jobs/5 both job 5's page (behind a proxy that
// cut the prefix) and the page /5 under the prefix; "queue", "/a/../b" or
// "/queue?x" gave a dashboard whose links led nowhere.
func TestPrefixRefused(t *testing.T) {
	e := testdb.New(t, engine.SQLite)
	q := newQueue(t, e)
	cases := []struct{ prefix, says string }{
		{"queue", "starts with /"},
		{"/queue?x=1", "query"},
		{"/queue#top", "query"},
		{"/a/../b", "clean"},
		{"/a/./b", "clean"},
		{"/..", "clean"},
		{"/a//b", "clean"},
		{"//", "clean"},
		{"/queue//", "clean"},
		{"/a\nb", "control"},
		{"/jobs", "dashboard's own path /jobs"},
		{"/jobs/", "dashboard's own path /jobs"},
		{"/jobs/5", "dashboard's own path /jobs"},
		{"/api", "dashboard's own path /api"},
		{"/api/jobs", "dashboard's own path /api"},
		{"/static", "dashboard's own path /static"},
	}
	for _, c := range cases {
		h, err := web.New(q, web.Options{Prefix: c.prefix})
		if err == nil || h != nil || !strings.Contains(err.Error(), c.says) || !strings.Contains(err.Error(), fmt.Sprintf("%q", c.prefix)) {
			t.Errorf("New with prefix %q = %v, %v; want no handler and an error naming it and saying %q", c.prefix, h, err, c.says)
			continue
		}
		if _, err2 := web.CheckPrefix(c.prefix); err2 == nil || err2.Error() != err.Error() {
			t.Errorf("CheckPrefix(%q) = %v; want New's error %v", c.prefix, err2, err)
		}
		func() {
			defer func() {
				if p := recover(); p == nil || !strings.Contains(fmt.Sprint(p), err.Error()) {
					t.Errorf("NewHandler with prefix %q panicked with %v; want a panic with %v", c.prefix, p, err)
				}
			}()
			web.NewHandler(q, web.Options{Prefix: c.prefix})
		}()
	}
}

// TestPrefixAccepted: the prefixes New takes, as links then start with
// them: one trailing slash is dropped, "/" is none, and a path that only
// resembles the dashboard's own (/jobsx, /admin/jobs, /API) is no
// overlap. Every page, asset and API route answers under each, mounted
// without http.StripPrefix and behind a proxy that cut the prefix.
func TestPrefixAccepted(t *testing.T) {
	e := testdb.New(t, engine.SQLite)
	q := newQueue(t, e)
	s := seed(t, q)
	cases := []struct{ prefix, base string }{
		{"", ""},
		{"/", ""},
		{"/queue/", "/queue"},
		{"/jobsx", "/jobsx"},
		{"/admin/jobs", "/admin/jobs"},
		{"/admin/api/static", "/admin/api/static"},
		{"/API", "/API"},
		{"/the queue", "/the%20queue"},
	}
	targets := []struct{ method, path, body string }{
		{"GET", "/", ""},
		{"GET", "/jobs", ""},
		{"GET", fmt.Sprintf("/jobs/%d", s.failed[0]), ""},
		{"GET", "/static/app.js", ""},
		{"GET", "/static/app.css", ""},
		{"GET", "/api/health", ""},
		{"GET", "/api/stats", ""},
		{"GET", "/api/overview", ""},
		{"GET", "/api/jobs?status=failed", ""},
		{"GET", fmt.Sprintf("/api/jobs/%d", s.failed[0]), ""},
		{"POST", "/api/jobs/retry", "{\"ids\":[987654321]}"},
		{"POST", "/api/jobs/cancel", "{\"ids\":[987654321]}"},
		{"POST", "/api/jobs/delete", "{\"ids\":[987654321]}"},
		{"POST", "/api/maintenance/expire", ""},
		{"POST", "/api/maintenance/reclaim", ""},
		{"POST", "/api/maintenance/prune", "{\"older_than\":\"3650d\"}"},
	}
	for _, c := range cases {
		got, err := web.CheckPrefix(c.prefix)
		if err != nil {
			t.Errorf("CheckPrefix(%q): %v", c.prefix, err)
			continue
		}
		h, err := web.New(q, web.Options{Prefix: c.prefix, Logger: testdb.QuietLogger()})
		if err != nil {
			t.Errorf("New with prefix %q: %v", c.prefix, err)
			continue
		}
		if want := strings.TrimSuffix(c.prefix, "/"); got != want {
			t.Errorf("CheckPrefix(%q) = %q; want %q", c.prefix, got, want)
		}
		for _, reqAt := range []string{c.base, ""} {
			for _, tg := range targets {
				code, body := call(t, h, tg.method, reqAt+tg.path, tg.body)
				if code != http.StatusOK {
					t.Errorf("prefix %q: %s %s = %d:\n%s", c.prefix, tg.method, reqAt+tg.path, code, body)
				}
				if tg.path == "/" && !strings.Contains(body, `href="`+c.base+`/jobs"`) {
					t.Errorf("prefix %q: the overview at %s does not link to %s/jobs", c.prefix, reqAt+tg.path, c.base)
				}
			}
		}
	}
}
