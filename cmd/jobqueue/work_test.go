//go:build unix

package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jobqueue/jobqueue/internal/testdb"
)

// TestWorkSIGTERM checks that SIGTERM lets a running command finish and the
// worker exit 0, with the job completed.
func TestWorkSIGTERM(t *testing.T) {
	t.Parallel()
	testdb.ForEachEngine(t, func(t *testing.T, e *testdb.Env) {
		c := envCLI(t, e)
		c.ok(t, "install")
		c.ok(t, "enqueue", "--name", "slow")
		dir := t.TempDir()
		started, finished := filepath.Join(dir, "started"), filepath.Join(dir, "finished")
		cmd, stderr := startWorker(t, c, "--grace", "20s", "--exec",
			"echo yes > "+started+"; sleep 1; echo yes > "+finished)
		waitFile(t, started, 20*time.Second)
		if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		if code := waitExit(t, cmd, 20*time.Second); code != 0 {
			t.Fatalf("exit %d after SIGTERM, want 0; stderr:\n%s", code, stderr)
		}
		if _, err := os.Stat(finished); err != nil {
			t.Errorf("the running command did not finish before the worker exited: %v", err)
		}
		assertStats(t, c, "", map[string]int64{"completed": 1})
	})
}

// startStuckWorker installs a SQLite table holding one job and starts a
// worker on it with --grace grace whose command starts a child, sleep
// seconds (in the background), and waits for it. It returns the worker's
// CLI, process and stderr, and the child's pid once the command has
// written it.
func startStuckWorker(t *testing.T, grace, seconds string) (c cli, cmd *exec.Cmd, stderr *syncBuffer, child int) {
	t.Helper()
	c = sqliteCLI(t)
	c.ok(t, "install")
	c.ok(t, "enqueue", "--name", "stuck")
	pidFile := filepath.Join(t.TempDir(), "child.pid")
	cmd, stderr = startWorker(t, c, "--grace", grace, "--exec", "sleep "+seconds+" & echo $! > "+pidFile+"; wait")
	child, err := strconv.Atoi(strings.TrimSpace(waitFile(t, pidFile, 20*time.Second)))
	if err != nil {
		t.Fatalf("reading the child's pid: %v", err)
	}
	return c, cmd, stderr, child
}

// assertReleased checks that the worker's stop released the one job, job
// 1, as Reclaim would: pending again, its attempt counted, its claim token
// cleared and its error saying it was shut down; else it fails the test
// saying what.
func assertReleased(t *testing.T, c cli, what string) {
	t.Helper()
	assertStats(t, c, "", map[string]int64{"pending": 1})
	var job map[string]any
	decodeJSON(t, c.ok(t, "show", "1", "--json"), &job)
	if job["attempts"] != 1.0 || job["claim_token"] != nil || !strings.Contains(fmt.Sprint(job["error"]), "shut down") {
		t.Errorf("%s: %v", what, job)
	}
}

// TestWorkGraceKillsGroup checks that a command still running when the
// grace period ends is killed with everything it started, the worker exits
// 0 and the job is released at once: pending again, its attempt counted,
// not failed. SIGHUP (the terminal or the ssh session closed) stops the
// worker as SIGINT and SIGTERM do: by default it would end the worker at
// once, and the commands, in process groups of their own that the hangup
// does not reach, would run on unwatched while their jobs stay in_progress.
func TestWorkGraceKillsGroup(t *testing.T) {
	t.Parallel()
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP} {
		t.Run(sig.String(), func(t *testing.T) {
			t.Parallel()
			c, cmd, stderr, child := startStuckWorker(t, "500ms", "60")
			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			if code := waitExit(t, cmd, 15*time.Second); code != 0 {
				t.Fatalf("exit %d after %v, want 0; stderr:\n%s", code, sig, stderr)
			}
			waitGone(t, child, 30*time.Second, "outlived the grace period", nil)
			assertReleased(t, c, "the interrupted job was not released as Reclaim would")
		})
	}
}

// TestWorkSecondSignalStopsAtOnce checks that a second SIGINT, SIGTERM or
// SIGHUP, caught while the worker gives its running command a long grace,
// ends the grace at once: the command's process group is killed, the job
// released (pending again, its attempt counted, as at the end of --grace),
// a log line says so, and the worker exits 0, well before the grace ends.
// Before, the worker ignored it, and only kill -9 would stop it, leaving
// the command running and the job in_progress until its lease passed.
func TestWorkSecondSignalStopsAtOnce(t *testing.T) {
	t.Parallel()
	for _, sigs := range [][2]syscall.Signal{
		{syscall.SIGINT, syscall.SIGINT},
		{syscall.SIGTERM, syscall.SIGTERM},
		{syscall.SIGTERM, syscall.SIGHUP},
	} {
		t.Run(sigs[0].String()+" then "+sigs[1].String(), func(t *testing.T) {
			t.Parallel()
			c, cmd, stderr, child := startStuckWorker(t, "10m", "600")
			if err := cmd.Process.Signal(sigs[0]); err != nil {
				t.Fatal(err)
			}
			eventually(t, 20*time.Second, "the worker to log that it waits for its running command", func() bool {
				return strings.Contains(stderr.String(), "worker stopping: waiting for running handlers")
			})
			if isZombie(cmd.Process.Pid) {
				t.Fatalf("the worker exited on the first signal, with a grace of 10m; stderr:\n%s", stderr)
			}
			if err := syscall.Kill(child, 0); err != nil {
				t.Fatalf("the command's child is gone after the first signal, with a grace of 10m: %v", err)
			}
			if err := cmd.Process.Signal(sigs[1]); err != nil {
				t.Fatal(err)
			}
			if code := waitExit(t, cmd, 20*time.Second); code != 0 {
				t.Fatalf("exit %d after %v then %v, want 0; stderr:\n%s", code, sigs[0], sigs[1], stderr)
			}
			if !strings.Contains(stderr.String(), "second signal: stopping at once") {
				t.Errorf("no log line about the hard stop; stderr:\n%s", stderr)
			}
			waitGone(t, child, 5*time.Second, "outlived the second signal", stderr)
			assertReleased(t, c, "the job cut off by the second signal was not released as at the end of --grace")
		})
	}
}

// TestWorkMaxRuntime checks that --max-runtime stops an idle worker with
// exit 0.
func TestWorkMaxRuntime(t *testing.T) {
	t.Parallel()
	c := sqliteCLI(t)
	c.ok(t, "install")
	start := time.Now()
	c.ok(t, "work", "--exec", "true", "--max-runtime", "1s")
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("--max-runtime 1s ran for %v", d)
	}
}

// TestWorkMaxRuntimeZero: --max-runtime 0 means no limit, as its help
// says (not "stop at once"): a worker given it waits for a job due in two
// seconds, runs it, and stops at --max-jobs.
func TestWorkMaxRuntimeZero(t *testing.T) {
	t.Parallel()
	c := sqliteCLI(t)
	help := c.ok(t, "work", "--help")
	if !strings.Contains(help, "0, the default: no limit") {
		t.Errorf("work --help does not say what --max-runtime 0 means:\n%s", help)
	}
	c.ok(t, "install")
	c.ok(t, "enqueue", "--name", "later", "--delay", "2s")
	c.ok(t, "work", "--exec", "true", "--max-runtime", "0", "--max-jobs", "1", "--poll-interval", "100ms")
	if got := c.ok(t, "stats", "--json"); !strings.Contains(got, `"completed":1`) {
		t.Errorf("the worker with --max-runtime 0 did not complete the job: %s", got)
	}
}

// TestWorkLeaseLostKillsGroup checks, on every engine, that when a running
// job's attempt loses its job (here: another claim token written in its
// row, as a reclaim and a new claim would), the command and what it started
// are killed at the next heartbeat, and the worker goes on.
func TestWorkLeaseLostKillsGroup(t *testing.T) {
	t.Parallel()
	testdb.ForEachEngine(t, func(t *testing.T, e *testdb.Env) {
		k, url, db := e.Kind, e.URL, e.DB
		c := cli{db: url, table: e.Table(t)}
		c.ok(t, "install")
		id := strings.TrimSpace(c.ok(t, "enqueue", "--name", "long"))
		pidFile := filepath.Join(t.TempDir(), "child.pid")
		cmd, stderr := startWorker(t, c, "--lease", "1s", "--grace", "1s", "--exec",
			"sleep 60 & echo $! > "+pidFile+"; wait")
		child, err := strconv.Atoi(strings.TrimSpace(waitFile(t, pidFile, 20*time.Second)))
		if err != nil {
			t.Fatal(err)
		}
		tbl := parseTable(t, k, c.table)
		if _, err := db.ExecContext(context.Background(), "UPDATE "+tbl.Quoted()+" SET claim_token = 'taken-over' WHERE id = "+id); err != nil {
			t.Fatal(err)
		}
		waitGone(t, child, 10*time.Second, "was not killed after its job was lost", stderr)
		if isZombie(cmd.Process.Pid) {
			t.Fatalf("the worker exited when one job was lost; stderr:\n%s", stderr)
		}
		if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		if code := waitExit(t, cmd, 15*time.Second); code != 0 {
			t.Fatalf("exit %d after SIGTERM; stderr:\n%s", code, stderr)
		}
		// The lost attempt recorded nothing: the row is as the
		// take-over left it.
		var job map[string]any
		decodeJSON(t, c.ok(t, "show", id, "--json"), &job)
		if job["status"] != "in_progress" || job["claim_token"] != "taken-over" {
			t.Errorf("the lost attempt changed the job: %v", job)
		}
	})
}

// TestWorkGraceZero checks that --grace 0 kills a running command at once
// on SIGTERM (no grace), rather than giving it the default 30 s: the worker
// exits 0 well within that, the command's child is gone and the job is
// released, pending again.
func TestWorkGraceZero(t *testing.T) {
	t.Parallel()
	for _, grace := range []string{"0", "0s"} {
		t.Run(grace, func(t *testing.T) {
			t.Parallel()
			c, cmd, stderr, child := startStuckWorker(t, grace, "60")
			if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			// The default grace is 30s: a worker still waiting after 15s
			// did not take --grace 0 as no grace.
			if code := waitExit(t, cmd, 15*time.Second); code != 0 {
				t.Fatalf("exit %d after SIGTERM, want 0; stderr:\n%s", code, stderr)
			}
			waitGone(t, child, 30*time.Second, "outlived --grace "+grace, stderr)
			assertStats(t, c, "", map[string]int64{"pending": 1})
		})
	}
}

// TestWorkGraceEscapedChild checks that a command that started a process
// outside its process group (setsid), which the kill cannot reach and which
// holds the command's output open, does not hold up the shutdown: once the
// grace has passed the worker stops waiting for that output in time to
// release the job (pending again) and exit 0, rather than giving up on the
// handler, exiting 1 and leaving the job in_progress until its lease.
func TestWorkGraceEscapedChild(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("setsid"); err != nil {
		t.Skip("no setsid:", err)
	}
	c := sqliteCLI(t)
	c.ok(t, "install")
	c.ok(t, "enqueue", "--name", "daemonizes")
	pidFile := filepath.Join(t.TempDir(), "escaped.pid")
	cmd, stderr := startWorker(t, c, "--grace", "100ms", "--exec",
		"setsid sleep 60 & echo $! > "+pidFile+"; sleep 60")
	escaped, err := strconv.Atoi(strings.TrimSpace(waitFile(t, pidFile, 20*time.Second)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := syscall.Kill(escaped, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
			t.Errorf("killing the escaped process %d: %v", escaped, err)
		}
	})
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := waitExit(t, cmd, 20*time.Second); code != 0 {
		t.Fatalf("exit %d after SIGTERM, want 0; stderr:\n%s", code, stderr)
	}
	assertStats(t, c, "", map[string]int64{"pending": 1})
}

// TestSignalWhileConnecting checks that work and web, stopped by SIGTERM
// or SIGINT while they still connect to the database (a server that
// accepts the connection and never answers), exit 0 as a stop asked for,
// not 1 with "cannot reach the database ... check that the server runs".
func TestSignalWhileConnecting(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		args []string
		sig  syscall.Signal
	}{
		{"work SIGTERM", []string{"work", "--exec", "true"}, syscall.SIGTERM},
		{"work SIGINT", []string{"work", "--exec", "true"}, syscall.SIGINT},
		{"web SIGTERM", []string{"web", "--addr", "127.0.0.1:0"}, syscall.SIGTERM},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { ln.Close() })
			accepted := make(chan net.Conn, 1)
			go func() {
				conn, err := ln.Accept()
				if err != nil {
					return // the listener was closed: the test ended
				}
				accepted <- conn // held open, never answered
			}()
			url := "postgres://postgres@" + ln.Addr().String() + "/test?sslmode=disable&connect_timeout=60"
			cmd := exec.Command(binary, append([]string{"--db", url}, tc.args...)...)
			stderr := startCmd(t, cmd)
			select {
			case conn := <-accepted:
				t.Cleanup(func() { conn.Close() })
			case <-time.After(20 * time.Second):
				t.Fatalf("%s did not connect within 20s; stderr: %s", tc.name, stderr)
			}
			if err := cmd.Process.Signal(tc.sig); err != nil {
				t.Fatal(err)
			}
			if code := waitExit(t, cmd, 20*time.Second); code != 0 {
				t.Fatalf("exit %d after %v while connecting, want 0; stderr:\n%s", code, tc.sig, stderr)
			}
		})
	}
}

// TestWorkNohup checks that a worker started with SIGHUP ignored (nohup)
// keeps it ignored: a hangup does not stop it, and it goes on running jobs.
func TestWorkNohup(t *testing.T) {
	t.Parallel()
	c := sqliteCLI(t)
	c.ok(t, "install")
	dir := t.TempDir()
	c.ok(t, "enqueue", "--name", "first")
	// The shell ignores SIGHUP and execs the worker, which inherits that.
	script := `trap '' HUP; exec "$@"`
	args := []string{"-c", script, "sh", binary, "--db", c.db, "--table", c.table, "work",
		"--poll-interval", "50ms", "--exec", "echo yes > " + dir + "/$JOB_NAME"}
	cmd := exec.Command("sh", args...)
	stderr := startCmd(t, cmd)
	waitFile(t, filepath.Join(dir, "first"), 20*time.Second)
	if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	c.ok(t, "enqueue", "--name", "second")
	waitFile(t, filepath.Join(dir, "second"), 20*time.Second)
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := waitExit(t, cmd, 15*time.Second); code != 0 {
		t.Fatalf("exit %d after SIGTERM, want 0; stderr:\n%s", code, stderr)
	}
}

// TestWorkDurationRanges: work's duration flags with a bound refuse a
// value outside it as a usage error naming the range, before the worker
// starts; the bounds themselves are taken. --maintenance-interval took any
// positive value (1ms ran the maintenance a thousand times a second).
func TestWorkDurationRanges(t *testing.T) {
	t.Parallel()
	c := sqliteCLI(t)
	c.ok(t, "install")
	cases := []struct {
		flag, value string
		ok          bool
		want        []string // in the error, when refused
	}{
		{"--maintenance-interval", "1ms", false, []string{"--maintenance-interval 1ms", "out of range", "1s to 24h"}},
		{"--maintenance-interval", "999ms", false, []string{"1s to 24h"}},
		{"--maintenance-interval", "25h", false, []string{"--maintenance-interval 25h", "1s to 24h"}},
		{"--maintenance-interval", "0", false, []string{"1s to 24h"}},
		{"--maintenance-interval", "1s", true, nil},
		{"--maintenance-interval", "1d", true, nil},
		{"--lease", "999ms", false, []string{"--lease 999ms", "at least 1s"}},
		{"--lease", "1s", true, nil},
		{"--leader-lease", "1s", false, []string{"--leader-lease 1s", "2s and 30m"}},
		{"--leader-lease", "31m", false, []string{"--leader-lease 31m", "2s and 30m"}},
		{"--leader-lease", "30m", true, nil},
	}
	for _, tc := range cases {
		t.Run(tc.flag+" "+tc.value, func(t *testing.T) {
			t.Parallel()
			r := c.run(t, "work", "--exec", "true", "--type", "none", "--max-runtime", "1ms", tc.flag, tc.value)
			if tc.ok {
				if r.code != 0 {
					t.Errorf("%s %s: exit %d, stderr %q", tc.flag, tc.value, r.code, r.stderr)
				}
				return
			}
			assertOneLineError(t, r, exitUsage, tc.want...)
		})
	}
}
