//go:build unix

package main

import (
	"bufio"
	"context"
	"net"
	"net/url"
	"path/filepath"
	"strings"
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

	ctx := context.Background()
	db, _, err := engine.Open(ctx, c.db)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	lock, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if _, err := lock.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if _, err := lock.ExecContext(ctx, "ROLLBACK"); err != nil {
			t.Error(err)
		}
	}()

	steps := []struct {
		sig  syscall.Signal
		logs string // what the worker logs once it took the signal
	}{
		{syscall.SIGTERM, "worker stopping: waiting for running handlers"},
		{syscall.SIGINT, "second signal: stopping at once"},
	}
	for _, s := range steps {
		if err := cmd.Process.Signal(s.sig); err != nil {
			t.Fatal(err)
		}
		// A minute: the worker's statements that the held write lock
		// keeps waiting (busy_timeout) may hold up its stop under load
		// (CI once passed 20 s before the first line).
		eventually(t, time.Minute, "the worker to log "+s.logs, func() bool {
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
