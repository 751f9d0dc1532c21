//go:build unix

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/testdb"
	"github.com/jobqueue/jobqueue/internal/testwait"
	"github.com/jobqueue/jobqueue/queue"
)

// TestPgBouncerTransactionPooling runs the queue through a PgBouncer in
// transaction pooling mode with fewer server connections than clients:
// install, enqueue (CLI and EnqueueMany), three `work --exec` processes of
// concurrency 4 draining 3 000 jobs, each run exactly once, a failed job
// shown, listed and retried, a job cancelled and deleted, stats, leader,
// a unique enqueue and its duplicate, expire, reclaim, prune, the dashboard,
// bench, a periodic job and migrate (version 1 to 2); no prepared-statement
// error anywhere
// and the workers poll (no LISTEN). Without default_query_exec_mode=exec,
// the error says to add it.
func TestPgBouncerTransactionPooling(t *testing.T) {
	t.Parallel()
	const jobs, workers = 3000, 3
	plain := testdb.PgBouncer(t, 4)
	pooled := plain + "&default_query_exec_mode=exec"
	direct := testdb.Open(t, engine.Postgres)
	table := testdb.Table(t, direct)
	c := cli{db: pooled, table: table, timeout: 2 * time.Minute}

	c.ok(t, "install")
	c.ok(t, "install") // idempotent, through the pooler too

	db := testdb.OpenURL(t, pooled)
	q, err := queue.New(db, queue.WithTable(table))
	if err != nil {
		t.Fatalf("queue.New through PgBouncer: %v", err)
	}
	defer q.Close()
	for start := 0; start < jobs; start += 1000 {
		batch := make([]queue.JobArgs, 1000)
		for i := range batch {
			batch[i] = queue.RawArgs{Name: "n", Payload: json.RawMessage(fmt.Sprintf(`{"n":%d}`, start+i))}
		}
		if n, err := q.EnqueueMany(context.Background(), batch); err != nil || n != len(batch) {
			t.Fatalf("EnqueueMany through PgBouncer: %d, %v", n, err)
		}
	}
	flaky := strings.TrimSpace(c.ok(t, "enqueue", "--name", "flaky", "--max-attempts", "1", "--base-delay", "1", "--max-delay", "1", "--payload", `{"n":-1}`))

	dir := t.TempDir()
	ran, retried := filepath.Join(dir, "ran"), filepath.Join(dir, "retried")
	script := fmt.Sprintf(`echo "$JOB_ID" >> %s; [ "$JOB_NAME" != flaky ] || [ -e %s ]`, ran, retried)
	var procs []*exec.Cmd
	var logs []*syncBuffer
	for range workers {
		cmd, stderr := startWorker(t, c, "--concurrency", "4", "--poll-interval", "100ms", "--exec", script)
		procs, logs = append(procs, cmd), append(logs, stderr)
	}

	waitStats(t, c, 3*time.Minute, map[string]int64{"completed": jobs, "failed": 1})
	var shown map[string]any
	decodeJSON(t, c.ok(t, "show", flaky, "--json"), &shown)
	if shown["status"] != "failed" {
		t.Errorf("show %s: status %v, want failed", flaky, shown["status"])
	}
	var failed []map[string]any
	decodeJSON(t, c.ok(t, "list", "--status", "failed", "--json"), &failed)
	if len(failed) != 1 || fmt.Sprint(failed[0]["id"]) != flaky {
		t.Errorf("list --status failed: %v, want job %s alone", failed, flaky)
	}
	if err := os.WriteFile(retried, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	c.ok(t, "retry", flaky)
	// The workers do not LISTEN behind PgBouncer: they find it by polling.
	waitStats(t, c, time.Minute, map[string]int64{"completed": jobs + 1})

	var listening int
	if err := direct.QueryRowContext(context.Background(),
		`SELECT count(*) FROM pg_stat_activity WHERE strpos(query, $1) > 0`, `LISTEN "`+table+`"`).Scan(&listening); err != nil {
		t.Fatal(err)
	}
	if listening != 0 {
		t.Errorf("%d server sessions LISTENed for the workers behind PgBouncer", listening)
	}
	// One of the workers leads (its lease lives in the leader side table,
	// no session state), and `leader` reads it through the pooler.
	var ld leaderJSON
	decodeJSON(t, c.ok(t, "leader", "--json"), &ld)
	if !ld.Leader || ld.Holder == "" {
		t.Errorf("leader --json through PgBouncer: %+v; want a worker leading", ld)
	}
	for i, cmd := range procs {
		if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		if code := waitExit(t, cmd, 30*time.Second); code != 0 {
			t.Errorf("worker %d: exit %d after SIGTERM; stderr:\n%s", i, code, logs[i])
		}
	}
	for i, l := range logs {
		if !strings.Contains(l.String(), "transaction pooler") {
			t.Errorf("worker %d did not say it polls behind the pooler:\n%s", i, l)
		}
		// The one error expected: the flaky job's first attempt.
		for _, line := range strings.Split(l.String(), "\n") {
			for _, bad := range []string{"prepared statement", "SQLSTATE", "level=ERROR", "level=WARN"} {
				if strings.Contains(line, bad) && !strings.Contains(line, "kind=flaky") {
					t.Errorf("worker %d logged %q: %s", i, bad, line)
				}
			}
		}
	}

	runs := map[int64]int{}
	b, err := os.ReadFile(ran)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Fields(string(b)) {
		id, err := strconv.ParseInt(line, 10, 64)
		if err != nil {
			t.Fatalf("bad line %q in the run log", line)
		}
		runs[id]++
	}
	flakyID, err := strconv.ParseInt(flaky, 10, 64)
	if err != nil {
		t.Fatalf("the flaky job's id %q is not a number: %v", flaky, err)
	}
	if len(runs) != jobs+1 {
		t.Errorf("%d distinct jobs ran, want %d", len(runs), jobs+1)
	}
	for id, n := range runs {
		want := 1
		if id == flakyID {
			want = 2 // failed once, then retried
		}
		if n != want {
			t.Errorf("job %d ran %d times, want %d", id, n, want)
		}
	}

	// Job control through the pooler: cancel a job waiting for later,
	// then delete it.
	later := strings.TrimSpace(c.ok(t, "enqueue", "--name", "later", "--delay", "1h"))
	c.ok(t, "cancel", later)
	decodeJSON(t, c.ok(t, "show", later, "--json"), &shown)
	if shown["status"] != "failed" || shown["error"] != "cancelled" {
		t.Errorf("show %s after cancel: status %v, error %v; want failed, cancelled", later, shown["status"], shown["error"])
	}
	c.ok(t, "delete", later)
	waitStats(t, c, time.Minute, map[string]int64{"completed": jobs + 1})

	// The other commands through the pooler: a unique enqueue and its
	// duplicate, expire, reclaim, prune, the dashboard, bench.
	unique := strings.TrimSpace(c.ok(t, "enqueue", "--name", "u", "--unique-key", "k"))
	if r := c.run(t, "enqueue", "--name", "u", "--unique-key", "k"); r.code != 0 || strings.TrimSpace(r.stdout) != unique || !strings.Contains(r.stderr, "duplicate of "+unique) {
		t.Errorf("the duplicate unique enqueue through PgBouncer: exit %d, stdout %q, stderr %q; want 0, %s, duplicate of %s", r.code, r.stdout, r.stderr, unique, unique)
	}
	c.ok(t, "enqueue", "--name", "short-lived", "--expires-in", "1ms")
	if out := c.ok(t, "expire"); out != "expired 1 job\n" {
		t.Errorf("expire through PgBouncer printed %q, want the short-lived job expired", out)
	}
	if out := c.ok(t, "reclaim"); out != "reclaimed 0 jobs\n" {
		t.Errorf("reclaim through PgBouncer printed %q, want nothing reclaimed (no worker runs)", out)
	}
	base, web := startWeb(t, c, nil, "--addr", "127.0.0.1:0", "--read-only")
	for _, path := range []string{"/api/health", "/api/stats"} {
		if code := httpDo(t, "GET", base+path, ""); code != 200 {
			t.Errorf("GET %s of the dashboard through PgBouncer: %d", path, code)
		}
	}
	if err := web.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := waitExit(t, web, 30*time.Second); code != 0 {
		t.Errorf("web through PgBouncer: exit %d after SIGTERM", code)
	}
	if out := c.ok(t, "prune", "--older-than", "0s"); out != fmt.Sprintf("pruned %d jobs\n", jobs+2) {
		t.Errorf("prune through PgBouncer printed %q, want the %d completed and expired jobs pruned", out, jobs+2)
	}
	waitStats(t, c, time.Minute, map[string]int64{"pending": 1})
	benchTable := testdb.Table(t, direct)
	bc := cli{db: pooled, table: benchTable, timeout: 2 * time.Minute}
	var bench benchResult
	decodeJSON(t, bc.ok(t, "bench", "--jobs", "500", "--workers", "4", "--latency-jobs", "20"), &bench)
	if bench.Completed != 520 || bench.Duplicates != 0 {
		t.Errorf("bench through PgBouncer: completed %d, duplicates %d; want 520 and 0", bench.Completed, bench.Duplicates)
	}

	// A periodic job, enqueued by the leader through the pooler, runs.
	ticks := filepath.Join(dir, "ticks")
	periodic, plog := startWorker(t, c, "--periodic", "tick=@every 1s", "--poll-interval", "100ms",
		"--exec", fmt.Sprintf(`[ "$JOB_NAME" != tick ] || echo tick >> %s`, ticks))
	waitLines(t, ticks, 2, time.Minute)
	if err := periodic.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := waitExit(t, periodic, 30*time.Second); code != 0 || strings.Contains(plog.String(), "prepared statement") {
		t.Errorf("the periodic worker through PgBouncer: exit %d; stderr:\n%s", code, plog)
	}

	// migrate: a version 1 table made version 2 through the pooler.
	v1 := testdb.Table(t, direct)
	ddl, err := os.ReadFile(filepath.Join("..", "..", "migrations", "testdata", "v1_postgres.sql"))
	if err != nil {
		t.Fatal(err)
	}
	for _, stmt := range splitSQL(strings.ReplaceAll(string(ddl), "{{table}}", v1)) {
		if _, err := direct.ExecContext(context.Background(), stmt); err != nil {
			t.Fatalf("%v\n%s", err, stmt)
		}
	}
	if _, err := direct.ExecContext(context.Background(), `INSERT INTO "`+v1+`" (name, payload) VALUES ('old', '{}')`); err != nil {
		t.Fatal(err)
	}
	mc := cli{db: pooled, table: v1, timeout: time.Minute}
	if out := mc.ok(t, "migrate", "--max-attempts", "5", "--base-delay", "120", "--max-delay", "3600"); !strings.Contains(out, "version 2") {
		t.Errorf("migrate through PgBouncer printed %q", out)
	}
	var migrated []map[string]any
	decodeJSON(t, mc.ok(t, "list", "--json"), &migrated)
	if len(migrated) != 1 || migrated[0]["max_attempts"] != 5.0 || migrated[0]["status"] != "pending" {
		t.Errorf("list after migrate through PgBouncer: %v; want the one pending job with max_attempts 5", migrated)
	}

	// Without the exec mode, pgx's statement cache collides with the
	// pooler's sharing of sessions; the error says what to add. Which
	// command meets the collision first depends on the pooler, so run a few.
	bare := cli{db: plain, table: table}
	failures := 0
	for range 4 {
		r := bare.run(t, "stats")
		if r.code == 0 {
			continue
		}
		failures++
		assertOneLineError(t, r, 1, "default_query_exec_mode=exec")
	}
	if failures == 0 {
		t.Errorf("4 commands through PgBouncer without default_query_exec_mode=exec all worked; the pooler may not be in transaction mode")
	}
}

// waitStats polls `stats --json` until it shows want (missing statuses 0).
func waitStats(t *testing.T, c cli, within time.Duration, want map[string]int64) {
	t.Helper()
	full := map[string]int64{"pending": 0, "in_progress": 0, "completed": 0, "failed": 0, "expired": 0}
	for k, v := range want {
		full[k] = v
	}
	var got map[string]int64
	testwait.Until(t, within, 200*time.Millisecond, func() bool {
		got = nil
		decodeJSON(t, c.ok(t, "stats", "--json"), &got)
		return fmt.Sprint(got) == fmt.Sprint(full)
	}, func() string { return fmt.Sprintf("stats are %v after %v, want %v", got, within, full) })
}
