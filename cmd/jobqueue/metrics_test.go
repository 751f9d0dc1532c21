//go:build unix

package main

// /metrics through the binary (metrics.go): `work --metrics-addr` during
// and after a drain of exec jobs on every engine, `web` beside the
// dashboard, the flags' bad input, and that Prometheus stays out of the
// queue and web packages.

import (
	"fmt"
	"net"
	"net/http"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jobqueue/jobqueue/internal/testdb"
	"github.com/jobqueue/jobqueue/internal/testwait"
	"github.com/jobqueue/jobqueue/queue"
)

// TestWorkMetrics: on every engine, `work --exec … --metrics-addr
// 127.0.0.1:0` drains jobs of two types, some completing and some failing
// (one of them after a retry), while its leader enqueues a periodic job
// every second; /metrics, scraped during the drain and at its end, has the
// gauges jobqueue_jobs per type and status and
// jobqueue_oldest_pending_age_seconds per type, equal to the table at the
// end, and the counters and histograms of what the process worked and
// enqueued, equal to the table's rows: jobqueue_jobs_worked_total by
// outcome (completed, failed, retried: attempts that did not end their
// job), jobqueue_job_duration_seconds_count, jobqueue_job_wait_seconds_count
// (one per attempt) and jobqueue_jobs_enqueued_total (the periodic jobs).
func TestWorkMetrics(t *testing.T) {
	t.Parallel()
	testdb.ForEachEngine(t, func(t *testing.T, e *testdb.Env) {
		c := envCLI(t, e)
		c.ok(t, "install")
		const completing, failing = 8, 3
		for range completing {
			c.ok(t, "enqueue", "--name", "ok", "--type", "fast")
		}
		for range failing {
			c.ok(t, "enqueue", "--name", "bad", "--type", "slow", "--max-attempts", "1", "--base-delay", "1", "--max-delay", "1")
		}
		c.ok(t, "enqueue", "--name", "bad", "--type", "slow", "--max-attempts", "2", "--base-delay", "1", "--max-delay", "1")
		q := openTestQueue(t, e, c.table)

		cmd, stderr := startWorker(t, c, "--concurrency", "2", "--poll-interval", "100ms", "--metrics-addr", "127.0.0.1:0",
			"--periodic", "tick=@every 1s",
			"--exec", `case "$JOB_NAME" in ok) sleep 0.2;; tick) ;; *) echo boom >&2; exit 1;; esac`)
		url := metricsURL(t, stderr)

		// During the drain: the gauges are there, by type and status.
		var during map[string]float64
		eventually(t, 30*time.Second, "a first scrape", func() bool {
			var code int
			during, code = scrape(t, url)
			return code == http.StatusOK
		})
		got := gaugeSeries(during, "fast", "slow")
		if len(got) != 2*len(queue.Statuses()) {
			t.Errorf("the scrape during the drain has jobqueue_jobs %v, want every status of fast and slow", got)
		}
		// The drain takes 0.8 s at least (8 × 0.2 s, 2 at once) and the
		// first scrape comes within 50 ms of the server's start.
		if got["fast/pending"]+got["fast/in_progress"] == 0 {
			t.Errorf("the first scrape came after the drain (jobqueue_jobs %v), want one during it", got)
		}
		for _, typ := range []string{"fast", "slow"} {
			if _, ok := during[`jobqueue_oldest_pending_age_seconds{type="`+typ+`"}`]; !ok {
				t.Errorf("the scrape during the drain has no jobqueue_oldest_pending_age_seconds{type=%q}", typ)
			}
		}

		// The end of the drain, in the table.
		eventually(t, 60*time.Second, "the drain's end", func() bool {
			n := tableCounts(t, q, "fast", "slow")
			return n["fast/completed"] == completing && n["slow/failed"] == failing+1
		})
		// At the end: the gauges catch up within their cache's TTL.
		want := tableCounts(t, q, "fast", "slow")
		var end map[string]float64
		eventually(t, 30*time.Second, "jobqueue_jobs equal to the table", func() bool {
			end, _ = scrape(t, url)
			got := gaugeSeries(end, "fast", "slow")
			return fmt.Sprint(got) == fmt.Sprint(want)
		})
		for _, typ := range []string{"fast", "slow"} {
			if v := end[`jobqueue_oldest_pending_age_seconds{type="`+typ+`"}`]; v != 0 {
				t.Errorf("jobqueue_oldest_pending_age_seconds{type=%q} = %v with no job pending, want 0", typ, v)
			}
		}
		// The counters and histograms equal the table, the periodic jobs'
		// (type default) included: two scrapes around one read of the
		// table agree with it (a tick may land between them: poll).
		var mismatch string
		testwait.Until(t, 30*time.Second, 50*time.Millisecond, func() bool {
			before, _ := scrape(t, url) // a failed scrape (nil) mismatches: poll again
			want := workedSeries(t, q, "fast", "slow", "default")
			after, _ := scrape(t, url)
			mismatch = seriesMismatch(want, before, after)
			return mismatch == ""
		}, func() string { return "/metrics does not match the table: " + mismatch })

		// Exactly SPEC 11's families, with the kinds Prometheus expects.
		var families []string
		for name := range end {
			if strings.HasPrefix(name, "# TYPE ") {
				families = append(families, strings.TrimPrefix(name, "# TYPE "))
			}
		}
		slices.Sort(families)
		wantFamilies := []string{
			"jobqueue_job_duration_seconds histogram", "jobqueue_job_wait_seconds histogram", "jobqueue_jobs gauge",
			"jobqueue_jobs_enqueued_total counter", "jobqueue_jobs_worked_total counter", "jobqueue_oldest_pending_age_seconds gauge",
		}
		if !slices.Equal(families, wantFamilies) {
			t.Errorf("/metrics has the families %q, want %q", families, wantFamilies)
		}

		if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		if code := waitExit(t, cmd, 20*time.Second); code != 0 {
			t.Fatalf("exit %d after SIGTERM, want 0; stderr:\n%s", code, stderr)
		}
		if _, code := scrape(t, url); code != 0 {
			t.Errorf("/metrics answered %d after the worker exited", code)
		}
	})
}

// TestWorkMetricsBadInput: a malformed --metrics-addr, or a negative
// --metrics-count-limit (of work or web), is a usage error naming the flag,
// found before the database is opened; an address in use fails with an
// error that names it and says what to do.
func TestWorkMetricsBadInput(t *testing.T) {
	t.Parallel()
	c := sqliteCLI(t)
	c.ok(t, "install")
	for _, addr := range []string{"9090", "127.0.0.1", "127.0.0.1:99999", "127.0.0.1:port"} {
		t.Run("malformed "+addr, func(t *testing.T) {
			r := c.run(t, "work", "--exec", "true", "--max-runtime", "1s", "--metrics-addr", addr)
			assertOneLineError(t, r, exitUsage, "--metrics-addr", addr)
		})
	}
	for _, cmd := range [][]string{{"work", "--exec", "true", "--max-runtime", "1s"}, {"web"}} {
		t.Run(cmd[0]+" negative count limit", func(t *testing.T) {
			r := c.run(t, append(cmd, "--metrics-count-limit", "-1")...)
			assertOneLineError(t, r, exitUsage, "--metrics-count-limit")
		})
	}
	t.Run("count limit without address", func(t *testing.T) {
		r := c.run(t, "work", "--exec", "true", "--max-runtime", "1s", "--metrics-count-limit", "10")
		assertOneLineError(t, r, exitUsage, "--metrics-count-limit needs --metrics-addr")
	})
	t.Run("in use", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		r := c.run(t, "work", "--exec", "true", "--max-runtime", "10s", "--metrics-addr", ln.Addr().String())
		assertOneLineError(t, r, exitFailure, ln.Addr().String(), "address already in use", "pick another --metrics-addr")
	})
}

// TestWebMetrics: `jobqueue web` serves /metrics beside the dashboard,
// behind its basic auth when that is on, and the dashboard still works.
func TestWebMetrics(t *testing.T) {
	t.Parallel()
	c := sqliteCLI(t)
	c.ok(t, "install")
	c.ok(t, "enqueue", "--name", "hello", "--type", "email")
	c.ok(t, "enqueue", "--name", "hello", "--type", "email", "--delay", "1h")

	t.Run("basic auth", func(t *testing.T) {
		base, _ := startWeb(t, c, []string{envWebUser + "=alice", envWebPassword + "=s3cret"}, "--addr", "127.0.0.1:0")
		if _, code := scrape(t, base+"/metrics"); code != http.StatusUnauthorized {
			t.Errorf("GET /metrics without credentials = %d, want 401", code)
		}
		series, code := scrape(t, base+"/metrics", "alice", "s3cret")
		if code != http.StatusOK {
			t.Fatalf("GET /metrics with credentials = %d, want 200", code)
		}
		want := map[string]int64{"email/pending": 2, "email/in_progress": 0, "email/completed": 0, "email/failed": 0, "email/expired": 0}
		if got := gaugeSeries(series, "email"); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("jobqueue_jobs = %v, want %v", got, want)
		}
		if v, ok := series[`jobqueue_oldest_pending_age_seconds{type="email"}`]; !ok || v < 0 {
			t.Errorf("jobqueue_oldest_pending_age_seconds{type=\"email\"} = %v (present %v), want a non-negative age", v, ok)
		}
		for name := range series {
			if strings.Contains(name, "otel_scope") || strings.HasPrefix(name, "target_info") {
				t.Errorf("series %s: the exporter's scope labels or target_info are on", name)
			}
		}
		if series["# TYPE jobqueue_jobs gauge"] != 1 || series["# TYPE jobqueue_oldest_pending_age_seconds gauge"] != 1 {
			t.Errorf("/metrics lacks the TYPE lines of the gauges jobqueue_jobs and jobqueue_oldest_pending_age_seconds: %v", series)
		}
		for _, path := range []string{"/", "/api/health", "/api/stats"} {
			if got := httpDo(t, "GET", base+path, "", "alice", "s3cret"); got != http.StatusOK {
				t.Errorf("the dashboard's GET %s = %d, want 200", path, got)
			}
		}
	})

	t.Run("read-only, count limit", func(t *testing.T) {
		base, _ := startWeb(t, c, nil, "--addr", "127.0.0.1:0", "--read-only", "--metrics-count-limit", "1")
		series, code := scrape(t, base+"/metrics")
		if got := gaugeSeries(series, "email"); code != http.StatusOK || got["email/pending"] != 1 || len(got) != len(queue.Statuses()) {
			t.Errorf("GET /metrics = %d with jobqueue_jobs %v, want 200 and every status of email, pending 1 (2 stopped at the limit 1)", code, got)
		}
		if got := httpDo(t, "GET", base+"/api/stats", ""); got != http.StatusOK {
			t.Errorf("GET /api/stats = %d, want 200", got)
		}
	})
}

// TestPrometheusOnlyInTheCommand: the queue and web packages link neither
// Prometheus nor OpenTelemetry's SDK or exporters; only the command does.
func TestPrometheusOnlyInTheCommand(t *testing.T) {
	t.Parallel()
	gobin := testdb.GoBinary()
	list := func(pkgs ...string) []string {
		out, err := exec.Command(gobin, append([]string{"list", "-deps"}, pkgs...)...).Output()
		if err != nil {
			t.Fatalf("go list -deps %v: %v", pkgs, err)
		}
		return strings.Fields(string(out))
	}
	banned := func(dep string) bool {
		return strings.HasPrefix(dep, "github.com/prometheus/") ||
			strings.HasPrefix(dep, "go.opentelemetry.io/otel/sdk") ||
			strings.HasPrefix(dep, "go.opentelemetry.io/otel/exporters")
	}
	for _, pkg := range []string{"github.com/jobqueue/jobqueue/queue", "github.com/jobqueue/jobqueue/web"} {
		for _, dep := range list(pkg) {
			if banned(dep) {
				t.Errorf("%s links %s", pkg, dep)
			}
		}
	}
	// The check can fail: the command does link them.
	if !slices.ContainsFunc(list("github.com/jobqueue/jobqueue/cmd/jobqueue"), banned) {
		t.Error("cmd/jobqueue links no Prometheus package; the check above would not see one either")
	}
}
