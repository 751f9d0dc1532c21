//go:build soak && linux

package main

// The soak (make soak; not in CI): JOBQUEUE_SOAK_JOBS jobs (default
// 1 000 000) through 4 `work --exec true` processes on PostgreSQL, the
// producer keeping at most 50 000 pending and pruning completed jobs older
// than 1 minute every 10 seconds (as the leader's retention would). Every
// 10 seconds it prints the workers' RSS, the table's size and dead tuples
// and the drain rate; at the end it checks that the RSS stayed flat after
// warm-up, the table size stayed bounded and the last drain rate is within
// 20 % of the first.

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/testdb"
	"github.com/jobqueue/jobqueue/queue"
)

type soakSample struct {
	at        time.Duration
	completed int64
	rate      float64 // jobs/s since the last sample
	rssKB     int64   // largest worker RSS
	tableKB   int64
	deadTup   int64
}

func TestSoak(t *testing.T) {
	total := 1_000_000
	if v := os.Getenv("JOBQUEUE_SOAK_JOBS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1000 {
			t.Fatalf("JOBQUEUE_SOAK_JOBS=%q: want a number of jobs, at least 1000", v)
		}
		total = n
	}
	const workers, maxPending, every = 4, 50_000, 10 * time.Second
	ctx := context.Background()
	url := testdb.URL(t, engine.Postgres)
	db := testdb.OpenURL(t, url)
	table := testdb.Table(t, db)
	c := cli{db: url, table: table}
	c.ok(t, "install")
	q, err := queue.New(db, queue.WithTable(table))
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	var procs []*exec.Cmd
	for range workers {
		cmd, _ := startWorker(t, c, "--concurrency", "8", "--poll-interval", "200ms", "--log-level", "warn", "--exec", "true")
		procs = append(procs, cmd)
	}
	enqueued := 0
	completedTotal := func() int64 {
		var n int64
		// Completed jobs are pruned: count what left the table too.
		if err := db.QueryRowContext(ctx, `SELECT count(*) FROM "`+table+`" WHERE status <> 'completed'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return int64(enqueued) - n
	}
	begin := time.Now()
	var samples []soakSample
	var last int64
	lastAt := begin
	nextSample, nextPrune := begin.Add(every), begin.Add(every)
	for {
		st, err := q.Stats(ctx, "")
		if err != nil {
			t.Fatal(err)
		}
		if pending := st[queue.StatusPending]; enqueued < total && pending < maxPending {
			n := min(10_000, total-enqueued)
			batch := make([]queue.JobArgs, n)
			for i := range batch {
				batch[i] = queue.RawArgs{Name: "soak", Payload: json.RawMessage(`{}`)}
			}
			if _, err := q.EnqueueMany(ctx, batch); err != nil {
				t.Fatal(err)
			}
			enqueued += n
			continue
		}
		now := time.Now()
		if now.After(nextPrune) {
			if _, err := q.Prune(ctx, time.Minute); err != nil {
				t.Fatal(err)
			}
			nextPrune = now.Add(every)
		}
		if now.After(nextSample) {
			done := completedTotal()
			s := soakSample{at: now.Sub(begin).Round(time.Second), completed: done,
				rate: float64(done-last) / now.Sub(lastAt).Seconds(), rssKB: maxRSS(t, procs)}
			if err := db.QueryRowContext(ctx, `SELECT pg_total_relation_size($1::regclass) / 1024, coalesce((SELECT n_dead_tup FROM pg_stat_user_tables WHERE relid = $1::regclass), 0)`,
				`"`+table+`"`).Scan(&s.tableKB, &s.deadTup); err != nil {
				t.Fatal(err)
			}
			fmt.Printf("soak %8v  completed %8d  %6.0f jobs/s  worker RSS %6d kB  table %8d kB  dead tuples %7d\n",
				s.at, s.completed, s.rate, s.rssKB, s.tableKB, s.deadTup)
			samples = append(samples, s)
			last, lastAt, nextSample = done, now, now.Add(every)
		}
		if enqueued == total && st[queue.StatusPending] == 0 && st[queue.StatusInProgress] == 0 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, p := range procs {
		p.Process.Signal(syscall.SIGTERM)
		waitExit(t, p, 60*time.Second)
	}
	elapsed := time.Since(begin)
	fmt.Printf("soak: %d jobs in %v (%.0f jobs/s overall)\n", total, elapsed.Round(time.Second), float64(total)/elapsed.Seconds())
	if len(samples) < 6 {
		t.Logf("only %d samples: too short a soak to judge memory, size and rate (raise JOBQUEUE_SOAK_JOBS)", len(samples))
		return
	}
	// Warm-up: the first quarter of the samples; the last sample may be a
	// partial window at the end of the drain, so it is left out.
	warm, end := samples[len(samples)/4], samples[len(samples)-2]
	var maxTable int64
	for _, s := range samples[len(samples)/4:] {
		maxTable = max(maxTable, s.tableKB)
	}
	fmt.Printf("soak: RSS %d → %d kB (×%.2f), table at most %d kB after warm-up, drain rate %.0f → %.0f jobs/s (×%.2f)\n",
		warm.rssKB, end.rssKB, float64(end.rssKB)/float64(warm.rssKB), maxTable, samples[1].rate, end.rate, end.rate/samples[1].rate)
	if float64(end.rssKB) > 1.5*float64(warm.rssKB) {
		t.Errorf("worker RSS grew from %d kB after warm-up to %d kB", warm.rssKB, end.rssKB)
	}
	if float64(maxTable) > 3*float64(warm.tableKB) {
		t.Errorf("table grew from %d kB after warm-up to %d kB", warm.tableKB, maxTable)
	}
	if end.rate < 0.8*samples[1].rate {
		t.Errorf("drain rate fell from %.0f to %.0f jobs/s", samples[1].rate, end.rate)
	}
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
				kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
				most = max(most, kb)
			}
		}
	}
	return most
}
