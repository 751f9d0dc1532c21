//go:build soak && linux

package main

// The soak (make soak; not in CI): JOBQUEUE_SOAK_JOBS jobs (default
// 1 000 000) through 4 `work --exec true --retention 1m` processes on
// a PostgreSQL server of its own (PostgreSQL's settings: autovacuum on). The workers' leader prunes (its maintenance, every
// --maintenance-interval, default 30 s); the producer only enqueues, keeping
// at most 50 000 jobs unfinished. Every 10 seconds it prints the workers'
// largest RSS, the table's size, its live and dead tuples and autovacuum
// count, and the drain rate of those 10 s.
//
// Warm-up lasts until the leader has pruned for one maintenance interval
// (the table then holds its steady share of finished jobs); the windows
// judged are those after it in which the workers never ran dry. The first
// n of them (n = 12, two minutes, or a third of them in a shorter run) are
// the start, the last n the end. The soak fails when a worker's RSS after
// warm-up exceeds 1.5× the start's median, the table after warm-up exceeds
// 3× the start's median size, autovacuum never ran on the table after
// warm-up, the end's median drain rate is more than 20 % below the start's,
// or a job did not complete.

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jobqueue/jobqueue/internal/testdb"
	"github.com/jobqueue/jobqueue/queue"
)

// soakSample is one 10-second window of the soak.
type soakSample struct {
	at         time.Duration
	completed  int64   // jobs completed since the start, pruned ones included
	unfinished int64   // pending or in progress at the end of the window
	rows       int64   // rows in the table (the rest were pruned)
	rate       float64 // jobs/s over the window
	rssKB      int64   // largest worker RSS
	tableKB    int64   // pg_total_relation_size: heap, indexes, TOAST
	liveTup    int64
	deadTup    int64
	autovacs   int64 // pg_stat_user_tables.autovacuum_count
	load       string
}

const (
	soakWorkers     = 4
	soakMaxPending  = 50_000
	soakWindow      = 10 * time.Second
	soakRetention   = time.Minute
	soakMaintenance = 30 * time.Second // work's default --maintenance-interval
)

func TestSoak(t *testing.T) {
	total := 1_000_000
	if v := os.Getenv("JOBQUEUE_SOAK_JOBS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1000 {
			t.Fatalf("JOBQUEUE_SOAK_JOBS=%q: want a number of jobs, at least 1000", v)
		}
		total = n
	}
	ctx := context.Background()
	// A server of the soak's own, as PostgreSQL comes (the shared test
	// server runs without autovacuum, which the soak is about), with the
	// shared server's durability and memory.
	url := testdb.PostgresServer(t, "fsync=on", "shared_buffers=128MB", "max_connections=100").URL()
	db := testdb.OpenURL(t, url)
	var settings string
	if err := db.QueryRowContext(ctx, `SELECT string_agg(name || '=' || current_setting(name), ' ' ORDER BY name) FROM pg_settings
		WHERE name IN ('autovacuum', 'autovacuum_naptime', 'autovacuum_vacuum_scale_factor', 'autovacuum_vacuum_cost_delay', 'autovacuum_vacuum_cost_limit', 'shared_buffers', 'fsync')`).Scan(&settings); err != nil {
		t.Fatal(err)
	}
	table := testdb.Table(t, db)
	c := cli{db: url, table: table}
	c.ok(t, "install")
	q, err := queue.New(db, queue.WithTable(table))
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	fmt.Printf("soak: %d jobs, %d workers, table %s, load at start %s\nsoak: server %s\n", total, soakWorkers, table, loadavg(t), settings)
	var procs []*exec.Cmd
	var logs []*syncBuffer
	for range soakWorkers {
		cmd, stderr := startWorker(t, c, "--concurrency", "8", "--poll-interval", "200ms", "--log-level", "warn",
			"--retention", soakRetention.String(), "--exec", "true")
		procs, logs = append(procs, cmd), append(logs, stderr)
	}
	enqueued := 0
	unfinished := func() int64 {
		var n int64
		if err := db.QueryRowContext(ctx, `SELECT count(*) FROM "`+table+`" WHERE status IN ('pending', 'in_progress')`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	begin := time.Now()
	var samples []soakSample
	var last int64
	lastAt := begin
	nextSample := begin.Add(soakWindow)
	planned := false // the plan after the last enqueue was printed
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		open := unfinished()
		for enqueued < total && open < soakMaxPending {
			n := min(10_000, total-enqueued, int(soakMaxPending-open))
			batch := make([]queue.JobArgs, n)
			for i := range batch {
				batch[i] = queue.RawArgs{Name: "soak", Payload: json.RawMessage(`{}`)}
			}
			if _, err := q.EnqueueMany(ctx, batch); err != nil {
				t.Fatal(err)
			}
			enqueued += n
			open += int64(n)
		}
		if now := time.Now(); now.After(nextSample) {
			s := soakSample{at: now.Sub(begin).Round(time.Second), unfinished: unfinished(), rssKB: maxRSS(t, procs), load: loadavg(t)}
			s.completed = int64(enqueued) - s.unfinished
			s.rate = float64(s.completed-last) / now.Sub(lastAt).Seconds()
			tableStats(ctx, t, db, table, &s)
			fmt.Printf("soak %6v  completed %8d  %5.0f jobs/s  unfinished %6d  rows %7d  worker RSS %6d kB  table %7d kB  live %7d  dead %7d  autovacuums %3d  load %s\n",
				s.at, s.completed, s.rate, s.unfinished, s.rows, s.rssKB, s.tableKB, s.liveTup, s.deadTup, s.autovacs, s.load)
			samples = append(samples, s)
			last, lastAt, nextSample = s.completed, now, now.Add(soakWindow)
			// The claim's plan: in full at the first window and once the
			// producer is done (the workers still busy), else a summary
			// every minute.
			if full := len(samples) == 1 || (enqueued == total && !planned); full || len(samples)%6 == 0 {
				plan := claimPlan(ctx, t, db, table)
				if full {
					fmt.Printf("soak %6v  claim plan:\n%s\n", s.at, strings.Join(plan, "\n"))
				} else {
					fmt.Printf("soak %6v  claim plan: %s\n", s.at, planSummary(plan))
				}
				planned = planned || enqueued == total
			}
			if enqueued == total && s.unfinished == 0 {
				break
			}
		}
		<-tick.C
	}
	for i, p := range procs {
		p.Process.Signal(syscall.SIGTERM)
		if code := waitExit(t, p, 60*time.Second); code != 0 {
			t.Errorf("worker %d exited %d; stderr:\n%s", i, code, logs[i])
		}
	}
	elapsed := time.Since(begin)
	fmt.Printf("soak: %d jobs in %v (%.0f jobs/s overall), load at end %s\n", total, elapsed.Round(time.Second), float64(total)/elapsed.Seconds(), loadavg(t))
	for i, l := range logs {
		if l.String() != "" {
			fmt.Printf("soak: worker %d logged (warnings and errors):\n%s", i, l)
		}
		if strings.Contains(l.String(), "pruning finished jobs failed") {
			t.Errorf("worker %d: the leader's prune failed", i)
		}
	}
	var notDone int64
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM "`+table+`" WHERE status <> 'completed'`).Scan(&notDone); err != nil {
		t.Fatal(err)
	}
	if notDone != 0 {
		t.Errorf("%d jobs did not complete", notDone)
	}
	judgeSoak(t, samples, total)
}

// judgeSoak checks the samples of a finished soak (see the file's comment).
func judgeSoak(t *testing.T, samples []soakSample, total int) {
	t.Helper()
	// Warm-up: until the leader has pruned, and one maintenance interval
	// more, so that the table holds its steady share of finished jobs.
	warm := -1
	for i, s := range samples {
		if s.rows < s.completed+s.unfinished { // something was pruned
			for j := i; j < len(samples); j++ {
				if samples[j].at >= s.at+soakMaintenance {
					warm = j
					break
				}
			}
			break
		}
	}
	if warm < 0 {
		t.Fatalf("the leader never pruned (or the soak ended within a maintenance interval of the first prune): raise JOBQUEUE_SOAK_JOBS")
	}
	// Windows in which the workers never ran dry: the producer had more
	// than a few claims' worth left at the window's end.
	var steady []soakSample
	for _, s := range samples[warm:] {
		if s.unfinished >= 2_000 {
			steady = append(steady, s)
		}
	}
	n := min(12, len(steady)/3)
	if n < 3 {
		t.Fatalf("%d windows after warm-up (at %v): too short a soak to judge memory, size and rate; raise JOBQUEUE_SOAK_JOBS (at least 9 windows needed)", len(steady), samples[warm].at)
	}
	start, end := steady[:n], steady[len(steady)-n:]
	median := func(ss []soakSample, f func(soakSample) float64) float64 {
		v := make([]float64, len(ss))
		for i, s := range ss {
			v[i] = f(s)
		}
		slices.Sort(v)
		if len(v)%2 == 1 {
			return v[len(v)/2]
		}
		return (v[len(v)/2-1] + v[len(v)/2]) / 2
	}
	rate := func(s soakSample) float64 { return s.rate }
	rss := func(s soakSample) float64 { return float64(s.rssKB) }
	size := func(s soakSample) float64 { return float64(s.tableKB) }
	rate0, rate1 := median(start, rate), median(end, rate)
	rss0, rss1 := median(start, rss), median(end, rss)
	size0, size1 := median(start, size), median(end, size)
	var maxRSSKB, maxTableKB, maxDead int64
	for _, s := range samples[warm:] {
		maxRSSKB, maxTableKB, maxDead = max(maxRSSKB, s.rssKB), max(maxTableKB, s.tableKB), max(maxDead, s.deadTup)
	}
	vacuums := samples[len(samples)-1].autovacs - samples[warm].autovacs
	fmt.Printf("soak: %d jobs; warm-up %v; %d steady windows of %v, start and end = medians of %d\n", total, samples[warm].at, len(steady), soakWindow, n)
	fmt.Printf("soak: drain rate %.0f → %.0f jobs/s (×%.2f)\n", rate0, rate1, rate1/rate0)
	fmt.Printf("soak: worker RSS %.0f → %.0f kB (×%.2f), at most %d kB after warm-up (×%.2f)\n", rss0, rss1, rss1/rss0, maxRSSKB, float64(maxRSSKB)/rss0)
	fmt.Printf("soak: table %.0f → %.0f kB (×%.2f), at most %d kB after warm-up (×%.2f); dead tuples at most %d; %d autovacuums after warm-up; %d rows left of %d\n",
		size0, size1, size1/size0, maxTableKB, float64(maxTableKB)/size0, maxDead, vacuums, samples[len(samples)-1].rows, total)
	if float64(maxRSSKB) > 1.5*rss0 {
		t.Errorf("worker RSS grew from %.0f kB after warm-up to %d kB", rss0, maxRSSKB)
	}
	if float64(maxTableKB) > 3*size0 {
		t.Errorf("table grew from %.0f kB after warm-up to %d kB", size0, maxTableKB)
	}
	if vacuums < 1 {
		t.Errorf("autovacuum never ran on the table after warm-up: its dead tuples were not reclaimed")
	}
	if rate1 < 0.8*rate0 {
		t.Errorf("drain rate fell from %.0f to %.0f jobs/s (×%.2f)", rate0, rate1, rate1/rate0)
	}
}

// tableStats fills s's table figures from the server's statistics.
func tableStats(ctx context.Context, t *testing.T, db *sql.DB, table string, s *soakSample) {
	t.Helper()
	err := db.QueryRowContext(ctx, `SELECT (SELECT count(*) FROM "`+table+`"), pg_total_relation_size($1::regclass) / 1024,
		coalesce(n_live_tup, 0), coalesce(n_dead_tup, 0), coalesce(autovacuum_count, 0)
		FROM (SELECT 1) one LEFT JOIN pg_stat_user_tables ON relid = $1::regclass`, `"`+table+`"`).
		Scan(&s.rows, &s.tableKB, &s.liveTup, &s.deadTup, &s.autovacs)
	if err != nil {
		t.Fatal(err)
	}
}

// claimPlan is EXPLAIN (ANALYZE, BUFFERS) of the claim's candidate query
// (the all-types branch of ClaimJobs, 8 jobs), run in a transaction rolled
// back, so that the rows it locks go back at once.
func claimPlan(ctx context.Context, t *testing.T, db *sql.DB, table string) []string {
	t.Helper()
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	return testdb.Strings(t, tx, `EXPLAIN (ANALYZE, BUFFERS) SELECT j.id FROM "`+table+`" j
		WHERE j.status = 'pending' AND j.scheduled_at <= (now() AT TIME ZONE 'UTC')
		  AND (j.expires_at IS NULL OR j.expires_at > (now() AT TIME ZONE 'UTC'))
		ORDER BY j.scheduled_at, j.id LIMIT 8 FOR UPDATE SKIP LOCKED`)
}

// planSummary is the scan, the first buffers line and the execution time
// of a plan.
func planSummary(plan []string) string {
	var scan, buffers, took string
	for _, l := range plan {
		l = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(l), "->"))
		switch {
		case scan == "" && strings.Contains(l, " Scan "):
			scan, _, _ = strings.Cut(l, "  (")
		case buffers == "" && strings.HasPrefix(l, "Buffers:"):
			buffers = l
		case strings.HasPrefix(l, "Execution Time:"):
			took = l
		}
	}
	return scan + "; " + buffers + "; " + took
}

// loadavg is the machine's load averages (1, 5 and 15 minutes).
func loadavg(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b))
	return strings.Join(f[:3], " ")
}

// maxRSS is the largest resident set of the worker processes, in kB.
func maxRSS(t *testing.T, procs []*exec.Cmd) int64 {
	t.Helper()
	var most int64
	for _, p := range procs {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.Process.Pid))
		if err != nil {
			t.Fatalf("worker %d: %v", p.Process.Pid, err)
		}
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
				kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
				if err != nil {
					t.Fatalf("worker %d: VmRSS %q: %v", p.Process.Pid, v, err)
				}
				most = max(most, kb)
			}
		}
	}
	return most
}
