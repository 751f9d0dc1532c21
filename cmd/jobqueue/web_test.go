package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jobqueue/jobqueue/internal/testwait"
)

// TestWebRefusals: the dashboard does not start where anyone could act
// without a password, nor with half the credentials or a bad address.
func TestWebRefusals(t *testing.T) {
	t.Parallel()
	c := sqliteCLI(t)
	c.ok(t, "install")
	cases := []struct {
		name string
		env  []string
		args []string
		want string
	}{
		{"all interfaces without auth", nil, []string{"--addr", "0.0.0.0:0"}, "refusing to serve"},
		{"empty host without auth", nil, []string{"--addr", ":0"}, "refusing to serve"},
		{"public name without auth", nil, []string{"--addr", "example.com:8080"}, "JOBQUEUE_WEB_USER"},
		{"user without password", []string{envWebUser + "=alice"}, nil, "set both"},
		{"password without user", []string{envWebPassword + "=x"}, nil, "set both"},
		{"user with a colon", []string{envWebUser + "=ops:team", envWebPassword + "=x"}, nil, "colon"},
		{"no port", nil, []string{"--addr", "127.0.0.1"}, "bad --addr"},
		{"port out of range", nil, []string{"--addr", "127.0.0.1:99999"}, "bad --addr"},
		{"negative port", nil, []string{"--addr", "127.0.0.1:-1"}, "bad --addr"},
		{"port not a number", nil, []string{"--addr", "127.0.0.1:80x"}, "bad --addr"},
		{"prefix not a path", nil, []string{"--prefix", "queue"}, "bad --prefix"},
		{"prefix with a query", nil, []string{"--prefix", "/queue?x=1"}, "bad --prefix"},
		{"prefix not clean", nil, []string{"--prefix", "/a/../queue"}, `bad --prefix "/a/../queue": give a clean path`},
		{"prefix of two slashes", nil, []string{"--prefix", "//"}, `bad --prefix "//": give a clean path`},
		{"prefix the jobs page", nil, []string{"--prefix", "/jobs"}, `bad --prefix "/jobs": it is or starts with the dashboard's own path /jobs`},
		{"prefix under the API", nil, []string{"--prefix", "/api/queue"}, `bad --prefix "/api/queue": it is or starts with the dashboard's own path /api`},
		{"prefix the assets", nil, []string{"--prefix", "/static/"}, `bad --prefix "/static/": it is or starts with the dashboard's own path /static`},
		{"prefix the metrics", nil, []string{"--prefix", "/metrics"}, `bad --prefix "/metrics": /metrics serves the metrics`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := c
			c.env = tc.env
			c.timeout = 20 * time.Second
			r := c.run(t, append([]string{"web"}, tc.args...)...)
			assertOneLineError(t, r, exitUsage, tc.want)
		})
	}
}

// startWeb starts `jobqueue web` and returns its base URL, read from the
// line it prints, and the process.
func startWeb(t *testing.T, c cli, env []string, args ...string) (string, *exec.Cmd) {
	t.Helper()
	base, _, _, cmd := startWebProcess(t, c, env, args...)
	return base, cmd
}

// startWebLine is startWeb for a test that reads the line web printed.
func startWebLine(t *testing.T, c cli, env []string, args ...string) (base, line string) {
	t.Helper()
	base, line, _, _ = startWebProcess(t, c, env, args...)
	return base, line
}

// startWebProcess starts `jobqueue web` and returns its base URL, the line
// it printed, what it writes to stderr (its log), and the process.
func startWebProcess(t *testing.T, c cli, env []string, args ...string) (string, string, *syncBuffer, *exec.Cmd) {
	t.Helper()
	cmd := exec.Command(binary, append([]string{"--db", c.db, "--table", c.table, "web"}, args...)...)
	cmd.Env = append(cleanEnv(), env...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	line := make(chan string, 1)
	go func() {
		b := make([]byte, 512)
		n, _ := io.ReadAtLeast(stdout, b, 1)
		line <- string(b[:n])
		io.Copy(io.Discard, stdout)
	}()
	select {
	case l := <-line:
		m := regexp.MustCompile(`http://(\S+?)/`).FindStringSubmatch(l)
		if m == nil {
			t.Fatalf("web printed %q, no URL; stderr: %s", l, stderr.String())
		}
		return "http://" + strings.Replace(m[1], "0.0.0.0", "127.0.0.1", 1), l, stderr, cmd
	case <-time.After(30 * time.Second):
		t.Fatalf("web printed nothing within 30s; stderr: %s", stderr.String())
	}
	return "", "", nil, nil
}

func httpDo(t *testing.T, method, url, body string, auth ...string) int {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if len(auth) == 2 {
		req.SetBasicAuth(auth[0], auth[1])
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := (&http.Client{Timeout: 20 * time.Second}).Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestWebServes runs the dashboard with basic auth, then read-only on every
// interface, and stops it with SIGINT.
func TestWebServes(t *testing.T) {
	t.Parallel()
	c := sqliteCLI(t)
	c.ok(t, "install")
	id := strings.TrimSpace(c.ok(t, "enqueue", "--name", "hello"))
	retry := fmt.Sprintf(`{"ids":[%s]}`, id)

	t.Run("basic auth", func(t *testing.T) {
		base, cmd := startWeb(t, c, []string{envWebUser + "=alice", envWebPassword + "=s3cret"}, "--addr", "127.0.0.1:0")
		cases := []struct {
			name, method, path, body string
			auth                     []string
			code                     int
		}{
			{"no credentials", "GET", "/api/stats", "", nil, 401},
			{"health without credentials", "GET", "/api/health", "", nil, 200},
			{"wrong password", "GET", "/", "", []string{"alice", "nope"}, 401},
			{"health", "GET", "/api/health", "", []string{"alice", "s3cret"}, 200},
			{"page", "GET", "/jobs/" + id, "", []string{"alice", "s3cret"}, 200},
			{"action", "POST", "/api/jobs/retry", retry, []string{"alice", "s3cret"}, 200},
			{"action without credentials", "POST", "/api/jobs/delete", retry, nil, 401},
		}
		for _, tc := range cases {
			if got := httpDo(t, tc.method, base+tc.path, tc.body, tc.auth...); got != tc.code {
				t.Errorf("%s: %s %s = %d, want %d", tc.name, tc.method, tc.path, got, tc.code)
			}
		}
		if err := cmd.Process.Signal(os.Interrupt); err != nil {
			t.Fatal(err)
		}
		if code := waitExit(t, cmd, 20*time.Second); code != 0 {
			t.Fatalf("web exited %d after SIGINT, want 0", code)
		}
	})

	t.Run("read-only on every interface", func(t *testing.T) {
		base, _ := startWeb(t, c, nil, "--addr", "0.0.0.0:0", "--read-only")
		if got := httpDo(t, "GET", base+"/api/stats", ""); got != 200 {
			t.Fatalf("GET /api/stats = %d", got)
		}
		if got := httpDo(t, "POST", base+"/api/jobs/delete", retry); got != 403 {
			t.Fatalf("read-only delete = %d, want 403", got)
		}
		if out := c.ok(t, "show", id); !strings.Contains(out, "pending") {
			t.Fatalf("the job changed: %s", out)
		}
	})
}

// TestWebHidePayloads: `web --hide-payloads` serves the dashboard with
// web.Options.HidePayloads, so that a job's payload (personal data,
// secrets) shows neither in the API nor on its page. The command had no
// way to hide them.
func TestWebHidePayloads(t *testing.T) {
	t.Parallel()
	c := sqliteCLI(t)
	c.ok(t, "install")
	id := strings.TrimSpace(c.ok(t, "enqueue", "--name", "hello", "--payload", `{"card":"4111-1111"}`))
	get := func(url string) string {
		t.Helper()
		resp, err := (&http.Client{Timeout: 20 * time.Second}).Get(url)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != 200 {
			t.Fatalf("GET %s = %d %s", url, resp.StatusCode, b)
		}
		return string(b)
	}
	base, _ := startWeb(t, c, nil, "--addr", "127.0.0.1:0", "--hide-payloads")
	var job map[string]any
	decodeJSON(t, get(base+"/api/jobs/"+id), &job)
	if p, ok := job["payload"]; !ok || p != nil {
		t.Errorf("GET /api/jobs/%s payload = %v; want null", id, job["payload"])
	}
	for _, path := range []string{"/api/jobs", "/jobs/" + id} {
		if body := get(base + path); strings.Contains(body, "4111") {
			t.Errorf("GET %s shows the hidden payload:\n%s", path, body)
		}
	}
}

// TestWebPrefix: `web --prefix /queue` serves the dashboard under /queue/,
// its links and assets there, and says so; a request a proxy passes on
// without the prefix is served too. The command had no way to serve under
// a path, so a proxy could put it only at the root of a site.
func TestWebPrefix(t *testing.T) {
	t.Parallel()
	c := sqliteCLI(t)
	c.ok(t, "install")
	id := strings.TrimSpace(c.ok(t, "enqueue", "--name", "hello"))
	base, line := startWebLine(t, c, nil, "--addr", "127.0.0.1:0", "--prefix", "/queue/")
	if !strings.Contains(line, base+"/queue/") {
		t.Errorf("web printed %q; want it to name %s/queue/", line, base)
	}
	get := func(path string) string {
		t.Helper()
		resp, err := (&http.Client{Timeout: 20 * time.Second}).Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s = %d %s", path, resp.StatusCode, b)
		}
		return string(b)
	}
	for _, path := range []string{"/queue/jobs", "/jobs"} { // the second as a proxy that cut /queue passes it on
		body := get(path)
		for _, link := range []string{`href="/queue/static/app.css"`, `href="/queue/jobs/` + id + `"`, `data-base="/queue"`} {
			if !strings.Contains(body, link) {
				t.Errorf("GET %s lacks %s", path, link)
			}
		}
	}
	get("/queue/static/app.js")
	get("/queue/api/jobs/" + id)
}

// TestWebLogsWhoActed: the log of an action names the user basic auth let
// in, and "anonymous" when basic auth is off, whatever user name the
// request claims. Without basic auth the dashboard logged the name in any
// Authorization header it was sent, which it never checked, as who acted.
func TestWebLogsWhoActed(t *testing.T) {
	t.Parallel()
	c := sqliteCLI(t)
	c.ok(t, "install")
	cases := []struct {
		name      string
		env       []string
		auth      []string // the request's basic auth
		user, not string   // the user the log names, a user it must not
	}{
		{"basic auth on", []string{envWebUser + "=alice", envWebPassword + "=s3cret"}, []string{"alice", "s3cret"}, "user=alice", ""},
		{"basic auth off", nil, []string{"mallory", "x"}, "user=anonymous", "mallory"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			id := strings.TrimSpace(c.ok(t, "enqueue", "--name", "hello"))
			base, _, logs, _ := startWebProcess(t, c, tc.env, "--addr", "127.0.0.1:0")
			if code := httpDo(t, "POST", base+"/api/jobs/cancel", fmt.Sprintf(`{"ids":[%s]}`, id), tc.auth...); code != http.StatusOK {
				t.Fatalf("cancel = %d, want 200", code)
			}
			testwait.For(t, 20*time.Second, 20*time.Millisecond, "the cancel is logged", func() bool { return strings.Contains(logs.String(), "action=cancel") })
			var line string
			for _, l := range strings.Split(logs.String(), "\n") {
				if strings.Contains(l, "action=cancel") {
					line = l
				}
			}
			if !strings.Contains(line, tc.user) || tc.not != "" && strings.Contains(line, tc.not) {
				t.Errorf("the cancel was logged as %q; want %s", line, tc.user)
			}
		})
	}
}
