//go:build unix

package main

import (
	"bufio"
	"context"
	"errors"
	"net"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jobqueue/jobqueue/internal/engine"
)

// TestWebSecondSignalStopsAtOnce: a second signal to web closes the
// connections of requests in flight at once, and web exits 0. Before, web
// went on waiting for them (5 s) and then exited 1 ("shut down the
// dashboard: context deadline exceeded").
func TestWebSecondSignalStopsAtOnce(t *testing.T) {
	t.Parallel()
	c := sqliteCLI(t)
	c.ok(t, "install")
	base, cmd := startWeb(t, c, nil, "--addr", "127.0.0.1:0")
	stderr := cmd.Stderr.(*syncBuffer)
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	// A request in flight whose body never comes: the graceful shutdown
	// would wait for it (past its 5 s). The server's "100 Continue" says
	// that the handler is reading the body.
	conn, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	req := "POST /api/jobs/retry HTTP/1.1\r\nHost: " + u.Host + "\r\nContent-Type: application/json\r\nContent-Length: 100\r\nExpect: 100-continue\r\n\r\n"
	if _, err := conn.Write([]byte(req)); err != nil {
		t.Fatal(err)
	}
	if err := conn.SetReadDeadline(time.Now().Add(30 * time.Second)); err != nil {
		t.Fatal(err)
	}
	status, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil || !strings.Contains(status, "100 Continue") {
		t.Fatalf("the request got %q (%v), want 100 Continue; stderr:\n%s", status, err, stderr)
	}
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		if err := cmd.Process.Signal(sig); err != nil {
			t.Fatal(err)
		}
	}
	if code := waitExit(t, cmd, 60*time.Second); code != 0 {
		t.Fatalf("web exited %d after two signals, want 0; stderr:\n%s", code, stderr)
	}
	if !strings.Contains(stderr.String(), "second signal: closing the dashboard's connections at once") {
		t.Errorf("no log line about the second signal; stderr:\n%s", stderr)
	}
}

// TestWorkThirdSignalExits: when the hard stop of a second signal is stuck
// (here the release of the killed command's job waits for a write lock
// that the test holds), a third signal ends the worker at once, exit 1,
// saying so. Before, the third signal was ignored.
func TestWorkThirdSignalExits(t *testing.T) {
	t.Parallel()
	c := sqliteCLI(t)
	c.ok(t, "install")
	c.ok(t, "enqueue", "--name", "stuck")
	started := filepath.Join(t.TempDir(), "started")
	cmd, stderr := startWorker(t, c, "--grace", "10m", "--exec", "echo > "+started+"; sleep 600")
	waitFile(t, started, 20*time.Second)

	holdWriteLock(t, c.db)

	steps := []struct {
		sig  syscall.Signal
		logs string // what the worker logs once it took the signal
	}{
		{syscall.SIGTERM, stopAcknowledged},
		{syscall.SIGINT, "second signal: stopping at once"},
	}
	for _, s := range steps {
		if err := cmd.Process.Signal(s.sig); err != nil {
			t.Fatal(err)
		}
		// Both lines are logged as the signal comes, whatever the
		// database does (see TestWorkStopAcknowledgedOnLockedDatabase).
		eventually(t, signalAckWithin, "the worker to log "+s.logs, func() bool {
			return strings.Contains(stderr.String(), s.logs)
		})
	}
	if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	if code := waitExit(t, cmd, 60*time.Second); code != exitFailure {
		t.Errorf("exit %d after the third signal, want %d; stderr:\n%s", code, exitFailure, stderr)
	}
	if !strings.Contains(stderr.String(), "jobqueue: third signal: exiting at once") {
		t.Errorf("no line about the third signal; stderr:\n%s", stderr)
	}
}

// stopAcknowledged is what work logs as soon as the first signal comes.
const stopAcknowledged = "signal received: worker stopping"

// signalAckWithin bounds the wait for a worker's line about a signal it
// took: it logs it at once (milliseconds), the rest is a loaded machine's
// margin.
const signalAckWithin = 10 * time.Second

// TestWorkStopAcknowledgedOnLockedDatabase: a SIGTERM is acknowledged at
// once while the worker's claim waits for a write lock that the test holds
// from before the worker started. Before, the worker said nothing until
// the claim in flight returned (the queue logs its stop once the claimer
// is done, and a claim waits out busy_timeout, retries, up to 30 s): CI
// once saw no line 20 s after a SIGTERM. Once the lock is gone the worker
// exits 0, leaving no job in_progress.
func TestWorkStopAcknowledgedOnLockedDatabase(t *testing.T) {
	t.Parallel()
	c := sqliteCLI(t)
	c.ok(t, "install")
	c.ok(t, "enqueue", "--name", "waiting")
	release := holdWriteLock(t, c.db)
	cmd, stderr := startWorker(t, c, "--poll-interval", "1ms", "--exec", "true")
	// The worker's claims need the write lock: from here on one is in
	// flight, waiting for it, nearly all the time.
	eventually(t, time.Minute, "the worker to start", func() bool {
		return strings.Contains(stderr.String(), "worker started")
	})
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	eventually(t, signalAckWithin, "the worker to log "+stopAcknowledged, func() bool {
		return strings.Contains(stderr.String(), stopAcknowledged)
	})
	release()
	if code := waitExit(t, cmd, time.Minute); code != 0 {
		t.Fatalf("exit %d after SIGTERM, want 0; stderr:\n%s", code, stderr)
	}
	// The claim in flight at the signal, if any, got the job once the
	// lock was gone, and the worker ran it before it stopped: either
	// way no job is left in_progress.
	var stats map[string]int64
	decodeJSON(t, c.ok(t, "stats", "--json"), &stats)
	if stats["pending"]+stats["completed"] != 1 || stats["in_progress"] != 0 {
		t.Errorf("stats %v, want the job pending or completed", stats)
	}
}

// holdWriteLock takes SQLite's write lock on the database at url (BEGIN
// IMMEDIATE) and returns release, which gives it back; it is given back
// when the test ends if release was not called.
func holdWriteLock(t *testing.T, url string) (release func()) {
	t.Helper()
	ctx := context.Background()
	db, _, err := engine.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	lock, err := db.Conn(ctx)
	if err != nil {
		db.Close()
		t.Fatal(err)
	}
	if _, err := lock.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		lock.Close()
		db.Close()
		t.Fatal(err)
	}
	var once sync.Once
	release = func() {
		once.Do(func() {
			if _, err := lock.ExecContext(ctx, "ROLLBACK"); err != nil {
				t.Error(err)
			}
			if err := lock.Close(); err != nil {
				t.Error(err)
			}
			if err := db.Close(); err != nil {
				t.Error(err)
			}
		})
	}
	t.Cleanup(release)
	return release
}

// TestWorkSecondSignalKillsAtOnceOnLockedDatabase: a worker runs a
// command, and claims every millisecond for its free slot, when the test
// takes SQLite's write lock: its next claim waits for it (busy_timeout,
// 10 s, and its retries). The first SIGTERM starts the grace at once (the
// worker says so within a few seconds), the second kills the command at
// once, and the worker exits 0 within the shutdown's time (the 5 s after
// the kill), the lock still held. Before, both waited for the claim in
// flight.
func TestWorkSecondSignalKillsAtOnceOnLockedDatabase(t *testing.T) {
	t.Parallel()
	const soon = 5 * time.Second // well under the claim's lock wait
	c := sqliteCLI(t)
	c.ok(t, "install")
	c.ok(t, "enqueue", "--name", "long")
	started := filepath.Join(t.TempDir(), "started")
	cmd, stderr := startWorker(t, c, "--concurrency", "2", "--poll-interval", "1ms", "--grace", "10m",
		"--exec", "echo $$ > "+started+"; exec sleep 600")
	pid, err := strconv.Atoi(strings.TrimSpace(waitFile(t, started, 20*time.Second)))
	if err != nil {
		t.Fatal(err)
	}
	holdWriteLock(t, c.db)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("stderr:\n%s", stderr)
		}
	})

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	eventually(t, soon, "the worker to start the grace", func() bool {
		return strings.Contains(stderr.String(), "worker stopping: waiting for running handlers")
	})
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	eventually(t, soon, "the command to be killed", func() bool {
		return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
	})
	if code := waitExit(t, cmd, 2*soon); code != 0 {
		t.Errorf("exit %d after the second signal, want 0; stderr:\n%s", code, stderr)
	}
}
