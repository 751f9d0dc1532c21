//go:build unix

package main

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/testdb"
	"github.com/jobqueue/jobqueue/internal/testwait"
	"github.com/jobqueue/jobqueue/queue"
)

// TestPostgresFailover drains jobs with three `work --exec` processes and
// a producer, all given the multi-host URL of a primary and its streaming
// standby (target_session_attrs=read-write); a third of the way through,
// the primary is stopped as if it crashed and the standby promoted. The
// drain finishes on the new primary with no manual step: every job the
// producer was told was enqueued exists and is completed or ran, except,
// with asynchronous replication, the jobs acknowledged in the old primary's
// last moments (one run of them, checked as such). With
// synchronous replication no completed job is lost (no job whose
// completion a worker was told of, its "job completed" log line, ran and
// completed again) and none ran more than twice (an attempt in flight at
// the failover runs again).
func TestPostgresFailover(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		sync bool
	}{{"synchronous", true}, {"asynchronous", false}} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			testFailover(t, c.sync)
		})
	}
}

var (
	seqRE       = regexp.MustCompile(`"seq": ?(\d+)`)
	completedRE = regexp.MustCompile(`msg="job completed" job_id=(\d+) `)
)

func testFailover(t *testing.T, synchronous bool) {
	const jobs, workers = 1500, 3
	pair := testdb.PostgresPair(t, synchronous)
	url := pair.URL()
	table := testdb.Table(t, nil) // the pair is the test's own
	c := cli{db: url, table: table, timeout: 2 * time.Minute}
	c.ok(t, "install")

	dir := t.TempDir()
	ran := filepath.Join(dir, "ran")
	var procs []*exec.Cmd
	var logs []*syncBuffer
	for range workers {
		cmd, stderr := startWorker(t, c, "--concurrency", "4", "--lease", "5s", "--poll-interval", "100ms",
			"--log-level", "info", "--exec", fmt.Sprintf(`echo "$JOB_ID $(cat)" >> %s`, ran))
		procs, logs = append(procs, cmd), append(logs, stderr)
	}

	// The producer enqueues jobs one by one and keeps those it was told
	// were enqueued; a failed enqueue is tried again (it may have been
	// written all the same: the job then exists twice).
	db, _, err := engine.Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	q, err := queue.New(db, queue.WithTable(table), queue.WithLogger(testdb.QuietLogger()))
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	acked := make(map[int]int64, jobs)
	ackedAt := make(map[int]time.Time, jobs)
	var mu sync.Mutex
	produced := make(chan error, 1)
	go func() {
		deadline := time.Now().Add(3 * time.Minute)
		for seq := 0; seq < jobs; {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			id, err := q.Enqueue(ctx, queue.RawArgs{Name: "n", Payload: []byte(fmt.Sprintf(`{"seq":%d}`, seq))})
			cancel()
			if err != nil {
				if time.Now().After(deadline) {
					produced <- fmt.Errorf("enqueue %d: %w", seq, err)
					return
				}
				time.Sleep(50 * time.Millisecond)
				continue
			}
			mu.Lock()
			acked[seq] = id
			ackedAt[seq] = time.Now()
			mu.Unlock()
			seq++
		}
		produced <- nil
	}()

	// A third of the way: the primary goes down as in a crash, the standby
	// is promoted.
	waitLines(t, ran, jobs/3, 3*time.Minute)
	if err := pair.Primary.Stop(syscall.SIGQUIT); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := pair.Promote(ctx); err != nil {
		t.Fatal(err)
	}
	promoted := time.Now()
	t.Logf("failover after %d lines of %d", countLines(t, ran), jobs)
	if err := <-produced; err != nil {
		t.Fatalf("the producer gave up: %v", err)
	}

	// The drain finishes on the new primary. The producer is done, so the
	// table holds every job it will hold: with asynchronous replication
	// that can be fewer than it was told of (an enqueue acknowledged in the
	// primary's last moments is lost with it, checked below), and a retried
	// enqueue may have written a job twice, so wait for every row to be
	// completed rather than for a count.
	var rows int64
	deadline := time.Now().Add(3 * time.Minute)
	for {
		var done, total int64
		err := db.QueryRowContext(context.Background(),
			`SELECT count(*) FILTER (WHERE status = 'completed'), count(*) FROM "`+table+`"`).Scan(&done, &total)
		if err == nil && total > 0 && done == total {
			rows = total
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the failover: %d of %d jobs completed (%v) within 3m; stats: %s", done, total, err, c.ok(t, "stats", "--json"))
		}
		time.Sleep(200 * time.Millisecond)
	}
	complaints := 0
	for _, l := range logs {
		complaints += strings.Count(l.String(), "level=ERROR") + strings.Count(l.String(), "level=WARN")
	}
	t.Logf("the workers logged %d warnings and errors while the primary was away", complaints)
	for i, cmd := range procs {
		if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatalf("worker %d is gone: %v; stderr:\n%s", i, err, logs[i])
		}
		if code := waitExit(t, cmd, 30*time.Second); code != 0 {
			t.Errorf("worker %d: exit %d; stderr:\n%s", i, code, logs[i])
		}
	}

	// What ran (job id and seq per line), and what the table holds.
	runsByID := map[int64]int{}
	ranSeq := map[int]bool{}
	b, err := os.ReadFile(ran)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		idText, payload, _ := strings.Cut(line, " ")
		id, err := strconv.ParseInt(idText, 10, 64)
		m := seqRE.FindStringSubmatch(payload)
		if err != nil || m == nil {
			t.Fatalf("bad line in the run log: %q", line)
		}
		seq, err := strconv.Atoi(m[1])
		if err != nil {
			t.Fatalf("bad seq in the run log's line %q: %v", line, err)
		}
		runsByID[id]++
		ranSeq[seq] = true
	}
	inTable := map[int]bool{}
	res, err := db.QueryContext(context.Background(), `SELECT payload->>'seq' FROM "`+table+`"`)
	if err != nil {
		t.Fatal(err)
	}
	for res.Next() {
		var s string
		if err := res.Scan(&s); err != nil {
			t.Fatal(err)
		}
		n, err := strconv.Atoi(s)
		if err != nil {
			t.Fatalf("a job's payload seq %q is not a number: %v", s, err)
		}
		inTable[n] = true
	}
	if err := res.Err(); err != nil {
		t.Fatal(err)
	}
	// An acknowledged job that neither exists nor ran was lost with the old
	// primary. Synchronous replication loses none. Asynchronous replication
	// loses only the last moments before the crash: the producer enqueues
	// one job at a time, so the commits reach the WAL in seq order and the
	// standby holds a prefix of them; what is lost is one run of seqs, all
	// acknowledged before the promotion, none of them in the table.
	var lostSeqs []int
	for seq := range acked {
		if !inTable[seq] && !ranSeq[seq] {
			lostSeqs = append(lostSeqs, seq)
		}
	}
	slices.Sort(lostSeqs)
	lost := len(lostSeqs)
	switch {
	case lost == 0:
	case synchronous:
		t.Errorf("acknowledged jobs %v are not in the table and never ran, despite synchronous replication", lostSeqs)
	default:
		for seq := lostSeqs[0]; seq <= lostSeqs[lost-1]; seq++ {
			if inTable[seq] {
				t.Errorf("acknowledged jobs %v were lost, but job seq %d among them is on the new primary: not one run of the last moments", lostSeqs, seq)
			}
		}
		for _, seq := range lostSeqs {
			if !ackedAt[seq].Before(promoted) {
				t.Errorf("job seq %d was acknowledged after the promotion (%v > %v), yet it is lost", seq, ackedAt[seq], promoted)
			}
		}
		t.Logf("asynchronous replication lost %d acknowledged jobs that had not run (seqs %d-%d, acknowledged %v-%v before the promotion)",
			lost, lostSeqs[0], lostSeqs[lost-1], promoted.Sub(ackedAt[lostSeqs[0]]), promoted.Sub(ackedAt[lostSeqs[lost-1]]))
	}
	twice := 0
	for _, n := range runsByID {
		if n > 1 {
			twice++
		}
	}
	// Completions the workers were told of (the database acknowledged them).
	completions := map[int64]int{}
	for _, l := range logs {
		for _, m := range completedRE.FindAllStringSubmatch(l.String(), -1) {
			id, err := strconv.ParseInt(m[1], 10, 64)
			if err != nil {
				t.Fatalf("bad job id in a completion logged: %q: %v", m[0], err)
			}
			completions[id]++
		}
	}
	if len(completions) == 0 {
		t.Fatalf("no \"job completed\" line in the workers' logs; the check below would see nothing")
	}
	completedTwice := 0
	for id, n := range completions {
		if n > 1 {
			completedTwice++
			if synchronous {
				t.Errorf("job %d: %d acknowledged completions; with synchronous replication the first is not lost, so the job never runs again", id, n)
			}
		}
	}
	t.Logf("%d rows, %d acknowledged, %d jobs ran twice or more, %d completed twice (a completion lost), %d acknowledged not in the table (ran before the failover)",
		rows, len(acked), twice, completedTwice, countMissing(acked, inTable))
	if synchronous {
		for id, n := range runsByID {
			if n > 2 {
				t.Errorf("job %d ran %d times; synchronous replication allows two at most", id, n)
			}
		}
		if m := countMissing(acked, inTable); m != 0 {
			t.Errorf("%d acknowledged jobs are missing from the new primary despite synchronous replication", m)
		}
	}
}

// countMissing counts the acknowledged seqs not in the table.
func countMissing(acked map[int]int64, inTable map[int]bool) int {
	n := 0
	for seq := range acked {
		if !inTable[seq] {
			n++
		}
	}
	return n
}

// countLines counts the lines of path (0 when it does not exist yet).
func countLines(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return strings.Count(string(b), "\n")
}

// waitLines waits until path has at least n lines.
func waitLines(t *testing.T, path string, n int, within time.Duration) {
	t.Helper()
	testwait.Until(t, within, 50*time.Millisecond, func() bool { return countLines(t, path) >= n }, func() string {
		return fmt.Sprintf("%s has %d lines after %v, want %d", path, countLines(t, path), within, n)
	})
}

// TestPostgresListenerLeavesFencedPrimary: after a failover that keeps the
// old primary running but fenced read-only (default_transaction_read_only
// on and the configuration reloaded: it still accepts connections), a
// worker given the pair's multi-host URL listens on the new primary within
// seconds, and a job enqueued there starts through its NOTIFY, well within
// the worker's poll interval (a minute). The listener stayed on the old
// primary, where no enqueue can notify it, until that connection broke:
// such a job waited for the poll.
func TestPostgresListenerLeavesFencedPrimary(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pair := testdb.PostgresPair(t, false)
	table := testdb.Table(t, nil) // the pair is the test's own
	c := cli{db: pair.URL(), table: table, timeout: 2 * time.Minute}
	c.ok(t, "install")
	ran := filepath.Join(t.TempDir(), "ran")
	cmd, stderr := startWorker(t, c, "--poll-interval", "1m", "--log-level", "info",
		"--exec", fmt.Sprintf(`echo "$JOB_ID" >> %s`, ran))
	oldPrimary, newPrimary := testdb.OpenURL(t, pair.Primary.URL()), testdb.OpenURL(t, pair.Standby.URL())

	// The worker listens (it runs a job enqueued after its start well
	// within its poll interval).
	enqueueOn := func(url string) {
		t.Helper()
		db := testdb.OpenURL(t, url)
		q, err := queue.New(db, queue.WithTable(table), queue.WithLogger(testdb.QuietLogger()))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := q.Enqueue(ctx, queue.RawArgs{Name: "n", Payload: []byte(`{}`)}); err != nil {
			t.Fatalf("enqueue on %s: %v", url, err)
		}
		if err := q.Close(); err != nil { // sends the enqueue's NOTIFY if still pending
			t.Fatalf("closing the queue on %s: %v", url, err)
		}
	}
	testwait.Until(t, 30*time.Second, 50*time.Millisecond, func() bool { return listeners(t, oldPrimary) > 0 }, func() string {
		return fmt.Sprintf("the worker does not listen on the primary after 30s; its stderr:\n%s", stderr)
	})
	enqueueOn(pair.Primary.URL())
	waitLines(t, ran, 1, 10*time.Second)

	// The failover: the old primary fenced, still up; the standby promoted.
	for _, stmt := range []string{`ALTER SYSTEM SET default_transaction_read_only = on`, `SELECT pg_reload_conf()`} {
		if _, err := oldPrimary.ExecContext(ctx, stmt); err != nil {
			t.Fatalf("fencing the old primary (%s): %v", stmt, err)
		}
	}
	pctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := pair.Promote(pctx); err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, 30*time.Second, 50*time.Millisecond, func() bool { return listeners(t, newPrimary) > 0 }, func() string {
		return fmt.Sprintf("the worker does not listen on the new primary 30s after the failover (%d listeners on the old one); its stderr:\n%s",
			listeners(t, oldPrimary), stderr)
	})
	enqueueOn(pair.Standby.URL())
	waitLines(t, ran, 2, 10*time.Second)

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatalf("the worker is gone: %v; stderr:\n%s", err, stderr)
	}
	if code := waitExit(t, cmd, 30*time.Second); code != 0 {
		t.Errorf("the worker: exit %d; stderr:\n%s", code, stderr)
	}
	if n := strings.Count(stderr.String(), "accepts no writes (a standby, or an old primary fenced"); n != 1 {
		t.Errorf("the worker said %d times that its listener's server accepts no writes; want once; stderr:\n%s", n, stderr)
	}
}

// listeners counts the sessions of db's server that listen for enqueues:
// their last statement is the LISTEN (ListenJobs), or the listener's check
// of its server (ServerReadOnly) that follows it, each named by sqlc's
// comment.
func listeners(t *testing.T, db *sql.DB) int {
	t.Helper()
	var n int
	err := db.QueryRowContext(context.Background(), `SELECT count(*) FROM pg_stat_activity
		WHERE pid <> pg_backend_pid() AND query ~ 'name: (ListenJobs|ServerReadOnly) '`).Scan(&n)
	if err != nil {
		t.Fatalf("counting the listeners: %v", err)
	}
	return n
}
