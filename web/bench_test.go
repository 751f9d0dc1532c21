package web_test

// BenchmarkDashboard times the overview and jobs pages, as served to a
// browser (queries and HTML), on an empty table and on a full one, on
// PostgreSQL and MariaDB/MySQL:
//
//	go test -run '^$' -bench Dashboard -benchtime 20x -timeout 60m ./web/
//
// The full table has JOBQUEUE_BENCH_ROWS rows (default 1 000 000; else
// JOBQUEUE_BENCH_JOBS, which CI sets to 500 for a quick pass), filled in
// bulk: 90% completed, 5% failed, 1% expired, 4% pending, 10 in progress,
// over 4 types and 8 kinds. Each page reports ms/op; compare full with
// empty (the README has the ratios of one run).

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/testdb"
	"github.com/jobqueue/jobqueue/queue"
	"github.com/jobqueue/jobqueue/web"
)

// benchRows is the number of rows of the full table.
func benchRows(b *testing.B) int {
	for _, key := range []string{"JOBQUEUE_BENCH_ROWS", "JOBQUEUE_BENCH_JOBS"} {
		if s := os.Getenv(key); s != "" {
			n, err := strconv.Atoi(s)
			if err != nil || n <= 0 {
				b.Fatalf("%s=%q is not a positive number", key, s)
			}
			return n
		}
	}
	return 1000000
}

var benchTypes = []string{"email", "images", "reports", "webhooks"}

// fill enqueues n jobs in bulk, then sets the status mix with a few
// statements.
func fill(b *testing.B, e *testdb.Env, q *queue.Queue, table string, n int) {
	b.Helper()
	ctx := context.Background()
	const chunk = 5000
	for i := 0; i < n; i += chunk {
		m := min(chunk, n-i)
		jobs := make([]queue.JobArgs, m)
		for j := range jobs {
			jobs[j] = queue.RawArgs{Name: fmt.Sprintf("kind_%d", (i+j)%8), Payload: json.RawMessage(fmt.Sprintf(`{"n":%d}`, i+j))}
		}
		if _, err := q.EnqueueMany(ctx, jobs, queue.Type(benchTypes[(i/chunk)%len(benchTypes)])); err != nil {
			b.Fatalf("fill: %v", err)
		}
	}
	t := `"` + table + `"`
	if e.Kind == engine.MySQL {
		t = "`" + table + "`"
	}
	for _, stmt := range []string{
		`UPDATE ` + t + ` SET status = 'completed', finished_at = created_at WHERE id % 100 < 90`,
		`UPDATE ` + t + ` SET status = 'failed', attempts = max_attempts, finished_at = created_at, error = 'boom: the remote end hung up' WHERE id % 100 BETWEEN 90 AND 94`,
		`UPDATE ` + t + ` SET status = 'expired', finished_at = created_at WHERE id % 100 = 95`,
		`UPDATE ` + t + ` SET status = 'in_progress', attempts = 1, claim_token = 'bench', lease_until = created_at WHERE id % 100000 = 99`,
	} {
		if _, err := e.DB.ExecContext(ctx, stmt); err != nil {
			b.Fatalf("fill: %s: %v", stmt, err)
		}
	}
	analyze := `ANALYZE ` + t
	if e.Kind == engine.MySQL {
		analyze = `ANALYZE TABLE ` + t
	}
	if _, err := e.DB.ExecContext(ctx, analyze); err != nil {
		b.Fatalf("fill: %s: %v", analyze, err)
	}
}

func BenchmarkDashboard(b *testing.B) {
	pages := []struct{ name, path string }{
		{"overview", "/"},
		{"jobs", "/jobs"},
		{"jobs_failed", "/jobs?status=failed"},
		{"jobs_type_failed", "/jobs?type=images&status=failed"},
		{"jobs_page_100", "/jobs?after_id=%d"}, // a page a hundred pages down
		{"api_overview", "/api/overview"},
	}
	for _, k := range []engine.Kind{engine.Postgres, engine.MySQL} {
		b.Run(string(k), func(b *testing.B) {
			e := testdb.New(b, k)
			for _, size := range []string{"empty", "full"} {
				table := e.Table(b)
				q := newQueue(b, e, table)
				n := 0
				if size == "full" {
					n = benchRows(b)
					start := time.Now()
					fill(b, e, q, table, n)
					b.Logf("%s: filled %d rows in %v", k, n, time.Since(start).Round(time.Second))
				}
				h := web.NewHandler(q, web.Options{Logger: quietLogger()})
				for _, p := range pages {
					path := p.path
					if p.name == "jobs_page_100" {
						path = fmt.Sprintf(p.path, max(n-100*50, 1))
					}
					b.Run(size+"/"+p.name, func(b *testing.B) {
						for b.Loop() {
							w := httptest.NewRecorder()
							h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, path, nil))
							if w.Code != http.StatusOK {
								b.Fatalf("GET %s = %d: %s", path, w.Code, w.Body.String())
							}
						}
						b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/op")
					})
				}
			}
		})
	}
}
