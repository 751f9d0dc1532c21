//go:build unix

package main

// Helpers of the metrics tests (metrics_test.go): a scrape of an endpoint,
// its address in a process's log, and the series the table's rows call for.

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jobqueue/jobqueue/queue"
)

// scrape GETs url (with basic auth when auth is user and password) and
// returns its series, "name{labels}" as the text format writes them →
// value, with each family's "# TYPE name kind" line as a key of value 1,
// and the status code; a failed request is code 0.
func scrape(t *testing.T, url string, auth ...string) (map[string]float64, int) {
	t.Helper()
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(auth) == 2 {
		req.SetBasicAuth(auth[0], auth[1])
	}
	resp, err := (&http.Client{Timeout: 20 * time.Second}).Do(req)
	if err != nil {
		return nil, 0
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: reading the body: %v", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, resp.StatusCode
	}
	series := map[string]float64{}
	for _, line := range strings.Split(string(body), "\n") {
		if strings.HasPrefix(line, "# TYPE ") {
			series[line] = 1
		}
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if i < 0 || err != nil {
			t.Fatalf("GET %s: a line that is not \"series value\": %q", url, line)
		}
		series[line[:i]] = v
	}
	return series, resp.StatusCode
}

// metricsURL waits for the worker's "serving metrics" log line and returns
// its URL.
func metricsURL(t *testing.T, stderr *syncBuffer) string {
	t.Helper()
	re := regexp.MustCompile(`msg="serving metrics" url=(\S+)`)
	var url string
	eventually(t, 30*time.Second, "the worker's \"serving metrics\" line", func() bool {
		if m := re.FindStringSubmatch(stderr.String()); m != nil {
			url = m[1]
		}
		return url != ""
	})
	return url
}

// tableCounts is the table's count per "type/status" through q.
func tableCounts(t *testing.T, q *queue.Queue, types ...string) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	for _, typ := range types {
		counts, err := q.Stats(context.Background(), typ)
		if err != nil {
			t.Fatal(err)
		}
		for s, n := range counts {
			out[typ+"/"+string(s)] = n
		}
	}
	return out
}

// gaugeSeries is the jobqueue_jobs series of series per "type/status".
func gaugeSeries(series map[string]float64, types ...string) map[string]int64 {
	out := map[string]int64{}
	for _, typ := range types {
		for _, s := range queue.Statuses() {
			if v, ok := series[fmt.Sprintf(`jobqueue_jobs{status="%s",type="%s"}`, s, typ)]; ok {
				out[typ+"/"+string(s)] = int64(v)
			}
		}
	}
	return out
}

// workedSeries is what the counters and histograms of a worker that has
// worked (and, for type default, enqueued) every job of q's table of the
// given types must hold, read from the table: attempts completed and failed
// per type, retried (attempts that did not end their job), handler
// durations of the completed ones, waits (one per attempt), and jobs
// enqueued of type default.
func workedSeries(t *testing.T, q *queue.Queue, types ...string) map[string]float64 {
	t.Helper()
	want := map[string]float64{}
	for _, typ := range types {
		rows, err := q.List(context.Background(), queue.ListFilter{Type: typ, Limit: queue.MaxListLimit})
		if err != nil {
			t.Fatal(err)
		}
		counts := map[string]float64{}
		for _, r := range rows {
			counts[string(r.Status)]++
			counts["attempts"] += float64(r.Attempts)
		}
		ended := counts["completed"] + counts["failed"]
		// Beside type, outcome and in_tx, the messaging semantic
		// conventions' labels.
		msg := func(op string) string {
			return fmt.Sprintf(`messaging_destination_name="%s",messaging_operation_name="%s",messaging_system="jobqueue"`, typ, op)
		}
		worked := func(outcome string) string {
			return fmt.Sprintf(`jobqueue_jobs_worked_total{%s,outcome="%s",type="%s"}`, msg("work"), outcome, typ)
		}
		for _, outcome := range []string{"completed", "failed"} {
			if counts[outcome] > 0 {
				want[worked(outcome)] = counts[outcome]
			}
		}
		if n := counts["attempts"] - ended - counts["in_progress"]; n > 0 {
			want[worked("retried")] = n
		}
		if counts["completed"] > 0 {
			want[`jobqueue_job_duration_seconds_count{`+msg("work")+`,outcome="completed",type="`+typ+`"}`] = counts["completed"]
		}
		if counts["attempts"] > 0 {
			want[`jobqueue_job_wait_seconds_count{`+msg("claim")+`,type="`+typ+`"}`] = counts["attempts"]
		}
		if typ == queue.DefaultType {
			// The leader writes a tick's job in its fenced transaction.
			want[`jobqueue_jobs_enqueued_total{in_tx="true",`+msg("enqueue")+`,type="`+typ+`"}`] = float64(len(rows))
		}
	}
	return want
}

// seriesMismatch says how the scrapes differ from want ("" when each has
// every series of want with its value).
func seriesMismatch(want map[string]float64, scrapes ...map[string]float64) string {
	var out []string
	for i, got := range scrapes {
		for name, v := range want {
			if g, ok := got[name]; !ok || g != v {
				out = append(out, fmt.Sprintf("scrape %d: %s = %v (present %v), the table says %v", i+1, name, g, ok, v))
			}
		}
	}
	return strings.Join(out, "; ")
}
