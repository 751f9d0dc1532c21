package testdb

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Process is a server a test started (PgBouncer, a PostgreSQL instance):
// its output is kept for the test's log, and a server that exits before
// the test stops it fails the test.
type Process struct {
	name string
	cmd  *exec.Cmd
	out  *lockedBuffer
	done chan struct{}
	err  error // set when done is closed

	// stopSig stops the server cleanly at the end of the test (default
	// os.Interrupt).
	stopSig os.Signal

	mu       sync.Mutex
	stopping bool
}

// lockedBuffer is a bytes.Buffer safe to read while a process writes it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// startProcess starts cmd (as the user postgres when the test runs as
// root), and stops it when t ends; if it exited on its own before, the
// test fails with its output.
func startProcess(t testing.TB, name string, cmd *exec.Cmd) (*Process, error) {
	t.Helper()
	if _, _, err := runAsPostgres(cmd); err != nil {
		return nil, err
	}
	p := &Process{name: name, cmd: cmd, out: &lockedBuffer{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.out, p.out
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.mu.Lock()
		unexpected := !p.stopping && p.Exited()
		p.mu.Unlock()
		if unexpected {
			t.Errorf("%s exited while the test ran (%v); its output:\n%s", name, p.err, tail(p.out.String(), 4000))
		}
		sig := p.stopSig
		if sig == nil {
			sig = os.Interrupt
		}
		if err := p.Stop(sig, 30*time.Second); err != nil {
			t.Logf("stopping %s: %v", name, err)
		}
		if t.Failed() {
			t.Logf("%s output:\n%s", name, tail(p.out.String(), 8000))
		}
	})
	return p, nil
}

// Exited reports whether the process has exited.
func (p *Process) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Output is what the process wrote so far.
func (p *Process) Output() string { return p.out.String() }

// Stop sends sig and waits up to within for the process to exit, then
// kills it. A process that already exited is left alone.
func (p *Process) Stop(sig os.Signal, within time.Duration) error {
	p.mu.Lock()
	p.stopping = true
	p.mu.Unlock()
	if p.Exited() {
		return nil
	}
	if err := p.cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	select {
	case <-p.done:
		return nil
	case <-time.After(within):
		p.cmd.Process.Kill()
		<-p.done
		return fmt.Errorf("%s did not stop within %v after %v; killed", p.name, within, sig)
	}
}

// waitTCP waits until addr accepts connections, the process exits or
// within passes.
func (p *Process) waitTCP(addr string, within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return nil
		}
		if p.Exited() {
			return fmt.Errorf("%s exited (%v) before it listened on %s: %s", p.name, p.err, addr, tail(p.out.String(), 2000))
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s does not listen on %s after %v: %s", p.name, addr, within, tail(p.out.String(), 2000))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// freePort is a TCP port of 127.0.0.1 that nothing listened on a moment
// ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// serverDir makes a new directory for a server's files, owned by the user
// servers run as (see runAsPostgres) with mode 0700, removed when t ends.
// t.TempDir would not do: its parent is not open to that user.
func serverDir(t testing.TB, pattern string) (string, error) {
	t.Helper()
	dir, err := os.MkdirTemp("", pattern)
	if err != nil {
		return "", err
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	uid, gid, err := serverUser()
	if err != nil {
		return "", err
	}
	if err := os.Chown(dir, uid, gid); err != nil {
		return "", err
	}
	return dir, os.Chmod(dir, 0o700)
}

// writeServerFile writes a file in a serverDir, owned by the server user.
func writeServerFile(path, content string) error {
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		return err
	}
	uid, gid, err := serverUser()
	if err != nil {
		return err
	}
	return os.Chown(path, uid, gid)
}

// lookBinary finds a server binary on PATH or in dirs.
func lookBinary(name string, dirs ...string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	for _, d := range dirs {
		p := d + "/" + name
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s is not installed (looked on PATH and in %s)", name, strings.Join(dirs, ", "))
}

// GoBinary is the go command for tests that build or list packages: the
// one on PATH, else the bin/go of the toolchain that built the test.
func GoBinary() string {
	//lint:ignore SA1019 only the fallback when no go is on PATH: the toolchain that built this binary
	p, err := lookBinary("go", filepath.Join(runtime.GOROOT(), "bin"))
	if err != nil {
		return "go" // exec then says it is not found
	}
	return p
}

// needServer fails the test in CI, and skips it elsewhere, for a server
// the test cannot start.
func needServer(t testing.TB, err error) {
	t.Helper()
	if Required() {
		t.Fatalf("testdb: %v (CI requires it)", err)
	}
	t.Skipf("testdb: skipping: %v", err)
}

// tail is the end of s, at most n bytes.
func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}

// itoa is strconv.Itoa, short.
func itoa(n int) string { return strconv.Itoa(n) }
