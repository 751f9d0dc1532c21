//go:build unix

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/testdb"
	"github.com/jobqueue/jobqueue/queue"
)

// Leadership through the binary: several `jobqueue work` processes of one
// table with a periodic job of @every 1s and maintenance every second.

// leaderLease is the processes' --leader-lease: the default, so that a
// loaded machine's slow statements do not cost the leader its lease.
const leaderLease = 5 * time.Second

// takeoverBound is the documented bound of a takeover after the leader
// dies: the lease and a fifth of it.
const takeoverBound = leaderLease + leaderLease/5

// TestWorkPeriodicOncePerTick: two, and three, workers with the same
// @every 1s job enqueue one job per tick, none twice, every second for ten
// seconds (ten ticks in a row).
func TestWorkPeriodicOncePerTick(t *testing.T) {
	t.Parallel()
	testdb.ForEachEngine(t, func(t *testing.T, e *testdb.Env) {
		for _, n := range []int{2, 3} {
			t.Run(fmt.Sprintf("%d_processes", n), func(t *testing.T) {
				c := envCLI(t, e)
				c.ok(t, "install")
				q := openTestQueue(t, e, c.table)
				procs := startProcs(t, c, n)
				waitLeader(t, procs, 30*time.Second)
				waitTicks(t, q, time.Time{}, 10, 60*time.Second)
				for _, p := range procs {
					if lost := p.logLines(0, "leadership lost"); len(lost) > 0 {
						// Its last lines say what held its renewals up
						// (seen once under a full suite's load).
						t.Fatalf("a leader lost its lease while all ran: %s\nits last 80 log lines:\n%s", lost[0], p.tail(80))
					}
				}
				assertConsecutive(t, q)
			})
		}
	})
}

// TestWorkLeaderFailover: three workers. One leads: only it runs the
// maintenance, and the @every 1s job gets one job per tick. kill -9 of the
// leader: another leads within the documented bound and the ticks go on.
// SIGSTOP of that one: the third takes over once the lease passed; resumed,
// the paused one finds it lost the lead and does nothing as leader, not
// even a statement that was in flight when it stopped (a tick it wrote
// before the takeover may be logged only after the resume, when the stop
// fell between its commit and its log line: its id is under that of the
// third's first tick). No tick ever has two jobs.
func TestWorkLeaderFailover(t *testing.T) {
	t.Parallel()
	testdb.ForEachEngine(t, func(t *testing.T, e *testdb.Env) {
		c := envCLI(t, e)
		c.ok(t, "install")
		q := openTestQueue(t, e, c.table)
		procs := startProcs(t, c, 3)

		// One leader; it alone maintains the table.
		first := waitLeader(t, procs, 30*time.Second)
		waitTicks(t, q, time.Time{}, 5, 60*time.Second)
		if n := len(first.logLines(0, "maintenance pass done")); n < 2 {
			t.Errorf("the leader ran %d maintenance passes in 5 s, want at least 2", n)
		}
		for _, p := range procs {
			if p == first {
				continue
			}
			if n := len(p.logLines(0, "maintenance pass done")); n != 0 {
				t.Errorf("a process that does not lead ran %d maintenance passes", n)
			}
			if n := len(p.logLines(0, "periodic job enqueued")); n != 0 {
				t.Errorf("a process that does not lead enqueued %d ticks", n)
			}
		}
		assertConsecutive(t, q)

		// kill -9 of the leader.
		if err := first.cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		killed := time.Now()
		_ = first.cmd.Wait() // "signal: killed", as meant
		rest := []*proc{}
		for _, p := range procs {
			if p != first {
				rest = append(rest, p)
			}
		}
		second := waitLeader(t, rest, takeoverBound+30*time.Second)
		took := time.Since(killed)
		t.Logf("a new leader %v after kill -9 (documented bound %v)", took.Round(time.Millisecond), takeoverBound)
		if took > takeoverBound+5*time.Second {
			t.Errorf("the new leader took %v after kill -9; the documented bound is %v", took, takeoverBound)
		}
		waitTicks(t, q, time.Now().UTC(), 3, 30*time.Second)

		// SIGSTOP of the new leader: the third takes over once its lease
		// passed. Then SIGCONT: it must notice that it lost the lead
		// before it acts as leader again.
		if err := second.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		var third *proc
		for _, p := range rest {
			if p != second {
				third = p
			}
		}
		waitLeader(t, []*proc{third}, takeoverBound+30*time.Second)
		// The id of the third's first tick as leader: a tick the resumed
		// process logs with a lower id was written before the takeover
		// (an act begun before the stop that committed before the third
		// took over, which the database makes wait for an act in flight;
		// the stop fell between its commit and its log line).
		firstOfThird := int64(0)
		for deadline := time.Now().Add(30 * time.Second); firstOfThird == 0; time.Sleep(20 * time.Millisecond) {
			if lines := third.logLines(0, "periodic job enqueued"); len(lines) > 0 {
				firstOfThird = logJobID(t, lines[0])
			} else if time.Now().After(deadline) {
				t.Fatal("the third process enqueued no tick within 30 s of taking the lead")
			}
		}
		// The stopped process writes nothing: everything it logged before
		// the stop is in its buffer (give the pipe a moment to drain).
		var offset int
		for stable := 0; stable < 5; time.Sleep(20 * time.Millisecond) {
			if n := len(second.stderr.String()); n == offset {
				stable++
			} else {
				offset, stable = n, 0
			}
		}
		resumed := time.Now().UTC()
		if err := second.cmd.Process.Signal(syscall.SIGCONT); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(30 * time.Second)
		for len(second.logLines(offset, "leadership lost")) == 0 {
			if time.Now().After(deadline) {
				t.Fatalf("the resumed process did not log that it lost the lead; its log since:\n%s", second.stderr.String()[offset:])
			}
			time.Sleep(50 * time.Millisecond)
		}
		waitTicks(t, q, resumed, 3, 30*time.Second)
		// Strict: the resumed process acts on nothing as leader, not one
		// statement. The database fences each act (each tick's enqueue,
		// each maintenance batch and round): it checks the leader row for
		// the act's own term first, and a takeover waits for an act in
		// flight (the server ends the session of one paused inside its
		// act), so an act begun before the pause either committed before
		// the third took over or changes nothing. The resumed process may
		// say that the database refused an act; it must log no act done.
		for _, msg := range []string{"periodic job enqueued", "periodic tick already enqueued", "maintenance pass done", "leadership gained"} {
			for _, line := range second.logLines(offset, msg) {
				if msg == "periodic job enqueued" && logJobID(t, line) < firstOfThird {
					t.Logf("the resumed process logged a tick written before the takeover (job id under the third's first, %d): %s", firstOfThird, line)
					continue
				}
				t.Errorf("the resumed process acted as leader after its lease had passed: %s\nits log from before the stop:\n%s", line, tail(second.stderr.String(), offset))
				break
			}
		}
		if second.leads() || !third.leads() {
			t.Errorf("after the resume: the resumed process leads %v, the third %v; want false, true", second.leads(), third.leads())
		}
		ticks(t, q) // none twice, all along
	})
}

// TestWorkPeriodicBadInput: a malformed --periodic is a usage error (exit
// 2) naming the flag, before anything runs.
func TestWorkPeriodicBadInput(t *testing.T) {
	t.Parallel()
	c := sqliteCLI(t)
	c.ok(t, "install")
	cases := []struct {
		name string
		args []string
		want []string // the flag's name, and what is wrong
	}{
		{"no equals sign", []string{"--periodic", "tick"}, []string{"--periodic"}},
		{"no name", []string{"--periodic", "=@hourly"}, []string{"--periodic"}},
		{"bad cron field", []string{"--periodic", "tick=61 * * * *"}, []string{"--periodic"}},
		{"four fields", []string{"--periodic", "tick=* * * *"}, []string{"--periodic"}},
		{"bad time zone", []string{"--periodic", "tick=CRON_TZ=Mars/Phobos 0 3 * * *"}, []string{"--periodic", "Mars/Phobos"}},
		{"bad every", []string{"--periodic", "tick=@every 10ms"}, []string{"--periodic"}},
		{"two with one name", []string{"--periodic", "tick=@hourly", "--periodic", "tick=@daily"}, []string{"--periodic", `two periodic jobs are named "tick"`}},
		{"name too long", []string{"--periodic", strings.Repeat("n", 201) + "=@hourly"}, []string{"--periodic", "201 characters", "at most 200"}},
		{"name not UTF-8", []string{"--periodic", "tick\xff=@hourly"}, []string{"--periodic", "not valid UTF-8"}},
		{"bad retention", []string{"--retention", "-1h"}, []string{"--retention"}},
		{"bad leader lease", []string{"--leader-lease", "1s"}, []string{"--leader-lease"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := c.run(t, append(append([]string{"work", "--exec", "true"}, tc.args...), "--max-runtime", "1s")...)
			assertOneLineError(t, r, 2, tc.want...)
		})
	}
	if got := c.ok(t, "stats", "--json"); !strings.Contains(got, `"pending":0`) {
		t.Errorf("a refused worker enqueued something: %s", got)
	}
}

// TestLeaderCommand: `jobqueue leader` says that none leads before any
// worker ran, then names the worker that leads, as text and JSON; on a
// table without the leader table it fails saying to run install.
func TestLeaderCommand(t *testing.T) {
	t.Parallel()
	c := sqliteCLI(t)
	c.ok(t, "install")
	if out := c.ok(t, "leader"); !strings.Contains(out, "no leader") {
		t.Errorf("leader before any worker: %q", out)
	}
	var none leaderJSON
	if err := json.Unmarshal([]byte(c.ok(t, "leader", "--json")), &none); err != nil || none.Leader || none.Since != nil {
		t.Errorf("leader --json before any worker: %+v, %v", none, err)
	}
	cmd, stderr := startWorker(t, c, "--exec", "true", "--poll-interval", "200ms")
	p := &proc{cmd: cmd, stderr: stderr}
	waitLeader(t, []*proc{p}, 30*time.Second)
	var ld leaderJSON
	if err := json.Unmarshal([]byte(c.ok(t, "leader", "--json")), &ld); err != nil {
		t.Fatal(err)
	}
	if !ld.Leader || ld.Term < 1 || ld.Since == nil || ld.LeaseUntil == nil || !strings.Contains(stderr.String(), "holder="+ld.Holder) {
		t.Errorf("leader --json = %+v; want the worker's holder (log: %s)", ld, stderr.String())
	}
	if out := c.ok(t, "leader"); !strings.Contains(out, "leader "+ld.Holder+" since ") {
		t.Errorf("leader = %q", out)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := waitExit(t, cmd, 20*time.Second); code != 0 {
		t.Fatalf("worker exit %d: %s", code, stderr)
	}
	if out := c.ok(t, "leader"); !strings.Contains(out, "no leader: the last one, "+ld.Holder) {
		t.Errorf("leader after the worker stopped = %q", out)
	}

	// A table installed before the leader table existed.
	old := c
	old.table = "old"
	old.ok(t, "install")
	db := testdb.OpenURL(t, c.db)
	if _, err := db.Exec(`DROP TABLE old_leader`); err != nil {
		t.Fatal(err)
	}
	assertOneLineError(t, old.run(t, "leader"), 1, "old_leader", "jobqueue install --table old")
	assertOneLineError(t, old.run(t, "work", "--exec", "true"), 1, "old_leader", "jobqueue install --table old")
}

// TestWorkRunMissed: with --run-missed the worker that gains the lead
// enqueues the latest tick that passed while none led (the last whole
// hour of an @hourly job), once; without it, none. The @every 1s job
// marks when the gain's catch-up is over: its first tick comes after.
func TestWorkRunMissed(t *testing.T) {
	t.Parallel()
	for _, missed := range []bool{true, false} {
		t.Run(fmt.Sprintf("run_missed_%v", missed), func(t *testing.T) {
			e := testdb.New(t, engine.SQLite)
			c := envCLI(t, e)
			c.ok(t, "install")
			q := openTestQueue(t, e, c.table)
			args := []string{"--type", "tick", "--exec", "true", "--poll-interval", "200ms",
				"--periodic", "hourly=@hourly", "--periodic", "tick=@every 1s", "--log-level", "debug"}
			if missed {
				args = append(args, "--run-missed")
			}
			before := time.Now().UTC()
			cmd, stderr := startWorker(t, c, args...)
			waitLeader(t, []*proc{{cmd: cmd, stderr: stderr}}, 30*time.Second)
			var hourly []*queue.JobRow
			deadline := time.Now().Add(30 * time.Second)
			for {
				rows, err := q.List(context.Background(), queue.ListFilter{Type: "tick", Limit: 1000})
				if err != nil {
					t.Fatal(err)
				}
				hourly = nil
				hasTick := false
				for _, r := range rows {
					switch r.Name {
					case "hourly":
						hourly = append(hourly, r)
					case "tick":
						hasTick = true
					}
				}
				if hasTick {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("no @every 1s tick within 30 s; log:\n%s", stderr.String())
				}
				time.Sleep(100 * time.Millisecond)
			}
			if !missed {
				if len(hourly) != 0 {
					t.Fatalf("%d hourly jobs without --run-missed; want none (the missed tick is not made up)", len(hourly))
				}
				return
			}
			after := time.Now().UTC()
			if len(hourly) != 1 {
				t.Fatalf("%d hourly jobs with --run-missed; want the 1 latest missed tick", len(hourly))
			}
			at := hourly[0].ScheduledAt
			if !at.Equal(before.Truncate(time.Hour)) && !at.Equal(after.Truncate(time.Hour)) {
				t.Fatalf("the missed tick's job is at %v; want the last whole hour (%v)", at, before.Truncate(time.Hour))
			}
		})
	}
}

// logJobID is the job_id of a log line.
func logJobID(t *testing.T, line string) int64 {
	t.Helper()
	m := regexp.MustCompile(`\bjob_id=(\d+)`).FindStringSubmatch(line)
	if m == nil {
		t.Fatalf("no job_id in the log line %q", line)
	}
	id, err := strconv.ParseInt(m[1], 10, 64)
	if err != nil {
		t.Fatalf("job_id of %q: %v", line, err)
	}
	return id
}
