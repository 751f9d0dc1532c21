package testdb

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"testing"
	"time"
)

// PGServer is a PostgreSQL instance a test started (see PostgresPair).
type PGServer struct {
	// Port is its port on 127.0.0.1.
	Port int
	proc *Process
}

// URL is the URL of the instance's postgres database.
func (s *PGServer) URL() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", s.Port)
}

// Stop stops the instance with sig: os.Interrupt is a fast shutdown,
// syscall.SIGQUIT an immediate one (like a crash: no checkpoint, the
// connections cut), and waits for it to exit.
func (s *PGServer) Stop(sig os.Signal) error { return s.proc.Stop(sig, 60*time.Second) }

// PGPair is a PostgreSQL primary with a streaming standby, both the test's
// own instances (never the system's cluster).
type PGPair struct {
	// Primary accepts writes until the test stops it; Standby streams from
	// it and becomes the primary when promoted.
	Primary, Standby *PGServer
}

// URL is the multi-host URL of the pair's postgres database that connects
// to whichever instance accepts writes (target_session_attrs=read-write),
// with a short connect timeout.
func (p *PGPair) URL() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d,127.0.0.1:%d/postgres?sslmode=disable&target_session_attrs=read-write&connect_timeout=3",
		p.Primary.Port, p.Standby.Port)
}

// Promote makes the standby a primary and waits until it accepts writes.
func (p *PGPair) Promote(ctx context.Context) error {
	db, err := sql.Open("pgx", p.Standby.URL())
	if err != nil {
		return err
	}
	defer db.Close()
	var ok bool
	if err := db.QueryRowContext(ctx, `SELECT pg_promote(true, 60)`).Scan(&ok); err != nil {
		return fmt.Errorf("promoting the standby: %w", err)
	}
	if !ok {
		return fmt.Errorf("promoting the standby: pg_promote returned false")
	}
	return nil
}

// PostgresPair initialises a primary (initdb) and a standby
// (pg_basebackup) in temp dirs, with PostgreSQL's own binaries
// (/usr/lib/postgresql/<version>/bin), starts them on free ports of
// 127.0.0.1, waits until the standby streams, and stops both when t ends.
// With sync, the primary's commits wait until the standby has flushed
// them (synchronous_standby_names, given to the primary alone, so a
// promoted standby does not wait for a standby of its own). Without the
// binaries the test fails in CI and is skipped elsewhere. The servers run
// as the user postgres when the test runs as root.
func PostgresPair(t testing.TB, sync bool) *PGPair {
	t.Helper()
	bin, err := postgresBin()
	if err != nil {
		needServer(t, err)
	}
	primaryDir, err := serverDir(t, "jobqueue-pg-primary-")
	if err != nil {
		t.Fatal(err)
	}
	standbyDir, err := serverDir(t, "jobqueue-pg-standby-")
	if err != nil {
		t.Fatal(err)
	}
	primaryData, standbyData := filepath.Join(primaryDir, "data"), filepath.Join(standbyDir, "data")
	if err := runAsServer(filepath.Join(bin, "initdb"), "-D", primaryData, "-U", "postgres", "--auth=trust", "--no-sync", "-E", "UTF8", "--locale=C"); err != nil {
		t.Fatalf("testdb: initdb: %v", err)
	}
	var extra []string
	if sync {
		extra = []string{"-c", "synchronous_standby_names=*"}
	}
	primary := startPostgres(t, bin, "primary", primaryData, extra...)
	err = runAsServer(filepath.Join(bin, "pg_basebackup"), "-h", "127.0.0.1", "-p", itoa(primary.Port), "-U", "postgres",
		"-D", standbyData, "-R", "-X", "stream", "-c", "fast", "--no-sync")
	if err != nil {
		t.Fatalf("testdb: pg_basebackup: %v", err)
	}
	standby := startPostgres(t, bin, "standby", standbyData)
	want := "async"
	if sync {
		want = "sync"
	}
	db, err := sql.Open("pgx", primary.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	deadline := time.Now().Add(60 * time.Second)
	for {
		var n int
		err := db.QueryRow(`SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming' AND sync_state = $1`, want).Scan(&n)
		if err == nil && n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("testdb: the standby does not stream (%s) after 60s (%v); its output:\n%s", want, err, tail(standby.proc.Output(), 3000))
		}
		time.Sleep(100 * time.Millisecond)
	}
	return &PGPair{Primary: primary, Standby: standby}
}

// startPostgres starts the instance in dataDir on a free port and waits
// until it answers queries.
func startPostgres(t testing.TB, bin, name, dataDir string, extra ...string) *PGServer {
	t.Helper()
	var lastErr error
	for range 3 {
		port, err := freePort()
		if err != nil {
			t.Fatal(err)
		}
		args := append([]string{"-D", dataDir, "-p", itoa(port),
			"-c", "listen_addresses=127.0.0.1", "-c", "unix_socket_directories=",
			"-c", "fsync=off", "-c", "shared_buffers=16MB", "-c", "max_connections=80",
			"-c", "max_wal_senders=4", "-c", "hot_standby=on", "-c", "logging_collector=off",
			"-c", "log_min_messages=warning"}, extra...)
		p, err := startProcess(t, "postgres "+name, exec.Command(filepath.Join(bin, "postgres"), args...))
		if err != nil {
			needServer(t, err)
		}
		s := &PGServer{Port: port, proc: p}
		if lastErr = s.waitReady(60 * time.Second); lastErr == nil {
			return s
		}
		p.Stop(os.Interrupt, 20*time.Second)
	}
	t.Fatalf("testdb: PostgreSQL %s did not start: %v", name, lastErr)
	return nil
}

// waitReady waits until the instance answers a query (a standby answers
// read-only ones).
func (s *PGServer) waitReady(within time.Duration) error {
	db, err := sql.Open("pgx", s.URL()+"&connect_timeout=2")
	if err != nil {
		return err
	}
	defer db.Close()
	deadline := time.Now().Add(within)
	for {
		err := db.QueryRow(`SELECT 1`).Scan(new(int))
		if err == nil {
			return nil
		}
		if s.proc.Exited() {
			return fmt.Errorf("it exited: %s", tail(s.proc.Output(), 3000))
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no answer after %v: %v; its output: %s", within, err, tail(s.proc.Output(), 3000))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// postgresBin is the directory of the newest PostgreSQL server binaries
// installed the Debian way.
func postgresBin() (string, error) {
	found, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	if len(found) == 0 {
		return "", fmt.Errorf("the PostgreSQL server binaries are not installed (no /usr/lib/postgresql/*/bin/initdb; apt-get install postgresql)")
	}
	sort.Strings(found)
	return filepath.Dir(found[len(found)-1]), nil
}

// runAsServer runs a server tool (initdb, pg_basebackup) to its end, as
// the user servers run as.
func runAsServer(name string, args ...string) error {
	cmd := exec.Command(name, args...)
	if _, _, err := runAsPostgres(cmd); err != nil {
		return err
	}
	cmd.Dir = os.TempDir()
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %w: %s", filepath.Base(name), err, tail(string(out), 3000))
	}
	return nil
}
