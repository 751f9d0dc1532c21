package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/testdb"
	"github.com/jobqueue/jobqueue/internal/testwait"
)

// binary is the jobqueue command built once by TestMain; the tests drive it
// end to end.
var binary string

func TestMain(m *testing.M) {
	// Fuzzing (go test -fuzz, in the coordinator and in each worker
	// process) runs no test that needs the binary: skip the build.
	flag.Parse()
	if f := flag.Lookup("test.fuzz"); f != nil && f.Value.String() != "" {
		os.Exit(m.Run())
	}
	if f := flag.Lookup("test.fuzzworker"); f != nil && f.Value.String() == "true" {
		os.Exit(m.Run())
	}
	// A test process started with SIGHUP ignored (nohup, some CI runners)
	// passes that on to the commands it starts, and the tests of a hangup
	// would find it ignored. Caught here (and never acted on), it is set
	// back to its default action in every command started, as from a
	// terminal; TestWorkNohup ignores it on purpose.
	if signal.Ignored(syscall.SIGHUP) {
		signal.Notify(make(chan os.Signal, 1), syscall.SIGHUP)
	}
	dir, err := os.MkdirTemp("", "jobqueue-cli-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "jobqueue")
	gobin := testdb.GoBinary()
	build := exec.Command(gobin, "build", "-o", binary, ".")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building jobqueue:", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// result is what one run of the binary did.
type result struct {
	code           int
	stdout, stderr string
}

// cli describes how to run the binary: the database, the table, extra
// environment, stdin and a time limit.
type cli struct {
	db, table string
	env       []string
	dir       string // working directory; empty: the test's
	stdin     string
	timeout   time.Duration
	// stdout, when set, is the command's stdout (say /dev/full) instead of
	// a buffer; result.stdout is then empty.
	stdout io.Writer
}

// run runs the binary with the global flags and args and waits for it.
func (c cli) run(t *testing.T, args ...string) result {
	t.Helper()
	timeout := c.timeout
	if timeout == 0 {
		timeout = 60 * time.Second
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var all []string
	if c.db != "" {
		all = append(all, "--db", c.db)
	}
	if c.table != "" {
		all = append(all, "--table", c.table)
	}
	all = append(all, args...)
	cmd := exec.CommandContext(ctx, binary, all...)
	cmd.Env = append(cleanEnv(), c.env...)
	cmd.Dir = c.dir
	cmd.Stdin = strings.NewReader(c.stdin)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if c.stdout != nil {
		cmd.Stdout = c.stdout
	}
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("jobqueue %s: did not finish within %v; stderr: %s", strings.Join(all, " "), timeout, errOut.String())
	}
	code := 0
	if err != nil {
		ee, ok := err.(*exec.ExitError)
		if !ok {
			t.Fatalf("jobqueue %s: %v", strings.Join(all, " "), err)
		}
		code = ee.ExitCode()
	}
	return result{code: code, stdout: out.String(), stderr: errOut.String()}
}

// ok runs the binary and fails the test unless it exits 0; it returns stdout.
func (c cli) ok(t *testing.T, args ...string) string {
	t.Helper()
	r := c.run(t, args...)
	if r.code != 0 {
		t.Fatalf("jobqueue %s: exit %d, stderr: %s", strings.Join(args, " "), r.code, r.stderr)
	}
	return r.stdout
}

// cleanEnv is the test's environment without JOBQUEUE_DB, so that the
// default database is predictable.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "JOBQUEUE_DB=") {
			env = append(env, kv)
		}
	}
	return env
}

// assertOneLineError checks that r failed with status code and exactly one
// line on stderr that contains each of want.
func assertOneLineError(t *testing.T, r result, code int, want ...string) {
	t.Helper()
	if r.code != code {
		t.Errorf("exit status %d, want %d; stderr: %q", r.code, code, r.stderr)
	}
	lines := strings.Split(strings.TrimSuffix(r.stderr, "\n"), "\n")
	if len(lines) != 1 || lines[0] == "" || !strings.HasPrefix(lines[0], "jobqueue: ") {
		t.Errorf("stderr is not one line starting with \"jobqueue: \": %q", r.stderr)
	}
	for _, w := range want {
		if !strings.Contains(r.stderr, w) {
			t.Errorf("stderr %q does not contain %q", r.stderr, w)
		}
	}
}

// parseTable is engine.ParseTable for a name the test knows is valid.
func parseTable(t *testing.T, k engine.Kind, name string) engine.Table {
	t.Helper()
	tbl, err := engine.ParseTable(k, name)
	if err != nil {
		t.Fatal(err)
	}
	return tbl
}

// eventually calls cond every 50 ms until it returns true, and fails the
// test naming what it waited for if that takes longer than within.
func eventually(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	testwait.For(t, within, 50*time.Millisecond, what, cond)
}

// syncBuffer is a bytes.Buffer safe to read while a process writes it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// startCmd starts cmd (a run of the binary) in the background with the
// tests' clean environment, kills it when the test ends, and returns its
// stderr.
func startCmd(t *testing.T, cmd *exec.Cmd) *syncBuffer {
	t.Helper()
	cmd.Env = cleanEnv()
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() })
	return stderr
}

// startWorker starts `jobqueue work` in the background and returns the
// process and its stderr.
func startWorker(t *testing.T, c cli, args ...string) (*exec.Cmd, *syncBuffer) {
	t.Helper()
	all := append([]string{"--db", c.db, "--table", c.table, "work"}, args...)
	cmd := exec.Command(binary, all...)
	stderr := startCmd(t, cmd)
	return cmd, stderr
}

// waitFile waits until path exists and returns its content.
func waitFile(t *testing.T, path string, within time.Duration) string {
	t.Helper()
	var content []byte
	testwait.Until(t, within, 20*time.Millisecond, func() bool {
		b, err := os.ReadFile(path)
		content = b
		return err == nil && len(b) > 0
	}, func() string { return fmt.Sprintf("%s did not appear within %v", path, within) })
	return string(content)
}

// waitExit waits for cmd to exit and returns its exit status.
func waitExit(t *testing.T, cmd *exec.Cmd, within time.Duration) int {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode()
		}
		if err != nil {
			t.Fatal(err)
		}
		return 0
	case <-time.After(within):
		cmd.Process.Kill()
		t.Fatalf("the worker did not exit within %v", within)
		return -1
	}
}
