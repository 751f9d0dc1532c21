package web_test

// BenchmarkDashboard times the overview and jobs pages, as served to a
// browser (queries and HTML), on an empty table and on a full one, on
// PostgreSQL, MariaDB/MySQL and SQLite (one engine at a time with -bench
// Dashboard/postgres, Dashboard/mysql or Dashboard/sqlite):
//
//	go test -run '^$' -bench Dashboard -benchtime 20x -timeout 60m ./web/
//
// The full table has JOBQUEUE_BENCH_ROWS rows (default 1 000 000; else
// JOBQUEUE_BENCH_JOBS, which CI sets to 500 for a quick pass), filled in
// bulk (see fill). Each page reports ms/op; compare full with empty (the
// README has the ratios of one run).

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/testdb"
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

// benchRareType and benchRareKind are a type and a kind few rows have.
const (
	benchRareType = "rare"
	benchRareKind = "kind_rare"
)

// fill inserts n jobs in bulk, each in its final state (multi-row
// INSERTs of 1000 rows), then vacuums (PostgreSQL) and analyzes the table:
// the state of a table that autovacuum (PostgreSQL) and the purge thread
// (InnoDB) keep up with. Rows go round 4 types and 8 kinds; of every 100,
// 90 are completed, 5 failed, 1 expired and 4 pending; 10 of the whole
// table are in progress. 10 of every million rows are of the rare type
// (benchRareType), 4 of the rare kind (benchRareKind).
func fill(b *testing.B, e *testdb.Env, table string, n int) {
	b.Helper()
	ctx := context.Background()
	quoted, ph := `"`+table+`"`, func(i int) string { return fmt.Sprintf("$%d", i) }
	// tm is a time as an argument: SQLite keeps times as text of one
	// fixed form (engine.SQLiteTimeFormat), which the queue compares.
	tm := func(t time.Time) any { return t }
	switch e.Kind {
	case engine.MySQL:
		quoted, ph = "`"+table+"`", func(int) string { return "?" }
	case engine.SQLite:
		ph, tm = func(int) string { return "?" }, e.Kind.TimeArg
	}
	const cols = 14
	const chunk = 1000
	now := time.Now().UTC().Truncate(time.Second)
	for i := 0; i < n; i += chunk {
		m := min(chunk, n-i)
		var sb strings.Builder
		sb.WriteString("INSERT INTO " + quoted + ` (name, type, payload, status, attempts, claim_token, lease_until,
			max_attempts, base_delay, max_delay, error, scheduled_at, finished_at, created_at) VALUES `)
		args := make([]any, 0, m*cols)
		for j := 0; j < m; j++ {
			id := i + j
			if j > 0 {
				sb.WriteString(",")
			}
			sb.WriteString("(")
			for c := 0; c < cols; c++ {
				if c > 0 {
					sb.WriteString(",")
				}
				sb.WriteString(ph(len(args) + c + 1))
			}
			sb.WriteString(")")
			at := now.Add(-time.Duration(n-id) * time.Millisecond)
			status, attempts, errText, finished := "pending", 0, any(nil), any(nil)
			var token, lease any
			switch r := id % 100; {
			case id%100000 == 99:
				status, attempts, token, lease = "in_progress", 1, "bench-"+strconv.Itoa(id), tm(now.Add(time.Minute))
			case r < 90:
				status, attempts, finished = "completed", 1, tm(at)
			case r < 95:
				status, attempts, errText, finished = "failed", 3, "boom: the remote end hung up", tm(at)
			case r == 95:
				status, finished = "expired", tm(at)
			}
			kind, typ := fmt.Sprintf("kind_%d", id%8), benchTypes[(id/7)%len(benchTypes)]
			if id%100000 == 49 {
				typ = benchRareType
			}
			if id%250000 == 51 {
				kind = benchRareKind
			}
			args = append(args, kind, typ,
				fmt.Sprintf(`{"n":%d}`, id), status, attempts, token, lease, 3, 60, 3600, errText, tm(at), finished, tm(at))
		}
		if _, err := e.DB.ExecContext(ctx, sb.String(), args...); err != nil {
			b.Fatalf("fill: %v", err)
		}
	}
	analyze := `VACUUM ANALYZE ` + quoted
	switch e.Kind {
	case engine.MySQL:
		analyze = `ANALYZE TABLE ` + quoted
	case engine.SQLite:
		analyze = `ANALYZE ` + quoted
	}
	if _, err := e.DB.ExecContext(ctx, analyze); err != nil {
		b.Fatalf("fill: %s: %v", analyze, err)
	}
}

func BenchmarkDashboard(b *testing.B) {
	// window is the page's Options.ListWindow (0: the default, below 0:
	// none).
	pages := []struct {
		name, path string
		window     int64
	}{
		{"overview", "/", 0},
		{"jobs", "/jobs", 0},
		{"jobs_failed", "/jobs?status=failed", 0},
		{"jobs_type_failed", "/jobs?type=images&status=failed", 0},
		{"jobs_in_progress", "/jobs?status=in_progress", 0}, // 10 rows of the million
		{"jobs_page_100", "/jobs?after_id=%d", 0},           // a page a hundred pages down
		// A rare kind's page: no index has the kind, so it examines one
		// window of ids (queue.DefaultListWindow, and 5 000 and 100 000
		// to show its cost), its first page and one in the middle of the
		// table, with a status too, and as JSON. Unbounded it reads the
		// whole table; and on PostgreSQL its costly plans made the
		// pgx-cached ListJobs settle on a generic plan, which the rare
		// type's page after it then took: the primary key read
		// backwards, every row filtered, instead of the type index.
		{"jobs_kind_rare", "/jobs?name=" + benchRareKind, 0}, // 4 rows of the million
		{"jobs_kind_rare_middle", "/jobs?name=" + benchRareKind + "&after_id=%d", 0},
		{"jobs_kind_rare_failed", "/jobs?status=failed&name=" + benchRareKind, 0},
		{"jobs_kind_rare_api", "/api/jobs?name=" + benchRareKind, 0},
		{"jobs_kind_rare_window_5000", "/jobs?name=" + benchRareKind, 5000},
		{"jobs_kind_rare_window_100000", "/jobs?name=" + benchRareKind, 100000},
		{"jobs_kind_rare_unbounded", "/jobs?name=" + benchRareKind, -1},
		{"jobs_type_rare", "/jobs?type=" + benchRareType, 0}, // 10 rows of the million
		{"api_overview", "/api/overview", 0},
	}
	for _, k := range []engine.Kind{engine.Postgres, engine.MySQL, engine.SQLite} {
		b.Run(string(k), func(b *testing.B) {
			e := testdb.New(b, k)
			for _, size := range []string{"empty", "full"} {
				table := e.Table(b)
				q := newQueue(b, e, table)
				n := 0
				if size == "full" {
					n = benchRows(b)
					start := time.Now()
					fill(b, e, table, n)
					b.Logf("%s: filled %d rows in %v", k, n, time.Since(start).Round(time.Second))
				}
				for _, p := range pages {
					h := web.NewHandler(q, web.Options{Logger: testdb.QuietLogger(), ListWindow: p.window})
					path := p.path
					switch p.name {
					case "jobs_page_100":
						path = fmt.Sprintf(p.path, max(n-100*50, 1))
					case "jobs_kind_rare_middle":
						path = fmt.Sprintf(p.path, max(n/2, 1))
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
