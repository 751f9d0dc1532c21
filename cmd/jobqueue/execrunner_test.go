//go:build unix

package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jobqueue/jobqueue/internal/testwait"
)

func TestExecRunner(t *testing.T) {
	t.Parallel()
	job := execJob{ID: 42, Name: "send_email", Type: "email", Attempt: 2, Payload: []byte(`{"to":"ada@example.com"}`)}
	cases := []struct {
		name       string
		command    string
		wantErr    []string // substrings of the error; nil: success
		wantStdout string
	}{
		{"exit 0 completes", "true", nil, ""},
		{"payload on stdin", "cat", nil, `{"to":"ada@example.com"}`},
		{"environment", `printf '%s %s %s %s' "$JOB_ID" "$JOB_NAME" "$JOB_TYPE" "$JOB_ATTEMPT"`, nil, "42 send_email email 2"},
		{"exit status fails with stderr", "echo working; echo 'smtp: connection refused' >&2; exit 3", []string{"exit status 3", "smtp: connection refused"}, "working\n"},
		{"failure without stderr", "exit 1", []string{"exit status 1", "no stderr output"}, ""},
		{"killed by a signal", "kill -9 $$", []string{"signal: killed"}, ""},
		{"command not found", "no-such-command-xyz", []string{"exit status 127", "not found"}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var out bytes.Buffer
			r := &execRunner{command: tc.command, stdout: &out}
			err := r.run(context.Background(), job)
			if tc.wantErr == nil && err != nil {
				t.Fatalf("error %v, want none", err)
			}
			if tc.wantErr != nil {
				if err == nil {
					t.Fatal("no error")
				}
				for _, w := range tc.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q does not contain %q", err, w)
					}
				}
			}
			if out.String() != tc.wantStdout {
				t.Errorf("stdout %q, want %q", out.String(), tc.wantStdout)
			}
		})
	}
}

// TestExecRunnerStderrTail checks that only the end of a long stderr
// becomes the error.
func TestExecRunnerStderrTail(t *testing.T) {
	t.Parallel()
	r := &execRunner{command: `i=0; while [ $i -lt 500 ]; do echo "line $i of noise" >&2; i=$((i+1)); done; echo "the real reason" >&2; exit 1`}
	err := r.run(context.Background(), execJob{ID: 1})
	if err == nil {
		t.Fatal("no error")
	}
	msg := err.Error()
	if !strings.HasSuffix(msg, "the real reason") {
		t.Errorf("error does not end with the last stderr line: ...%q", msg[max(0, len(msg)-80):])
	}
	if strings.Contains(msg, "line 0 of noise") {
		t.Error("error holds the start of stderr")
	}
	if len(msg) > stderrTail+100 {
		t.Errorf("error has %d bytes, want about %d", len(msg), stderrTail)
	}
	if !strings.Contains(msg, "…") {
		t.Error("a cut error does not say it was cut")
	}
}

// TestExecRunnerKillsGroup checks that cancelling the job's context kills
// the command and what it started (its process group), promptly.
func TestExecRunnerKillsGroup(t *testing.T) {
	t.Parallel()
	pidFile := filepath.Join(t.TempDir(), "child.pid")
	// The shell starts a child in the background and waits for it: killing
	// only the shell would leave the child running.
	r := &execRunner{command: "sleep 60 & echo $! > " + pidFile + "; wait", waitDelay: 2 * time.Second}
	cause := errors.New("lease lost")
	ctx, cancel := context.WithCancelCause(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.run(ctx, execJob{ID: 7}) }()
	var childPID int
	testwait.Until(t, 10*time.Second, 20*time.Millisecond, func() bool {
		b, err := os.ReadFile(pidFile)
		if err != nil || !strings.HasSuffix(string(b), "\n") {
			return false // not written yet, or not whole
		}
		if childPID, err = strconv.Atoi(strings.TrimSpace(string(b))); err != nil {
			t.Fatalf("the pid file holds %q: %v", b, err)
		}
		return true
	}, func() string { return "the command did not start its child" })
	start := time.Now()
	cancel(cause)
	select {
	case err := <-done:
		if err == nil || !errors.Is(err, cause) || !strings.Contains(err.Error(), "command killed") {
			t.Errorf("error %v, want one saying the command was killed because of %v", err, cause)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("run did not return after the context was cancelled")
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("took %v to return after cancel", d)
	}
	waitGone(t, childPID, 30*time.Second, "survived the kill", nil)
}

// waitGone waits until process pid has ended, or is a zombie about to be
// reaped by init, polling every 20 ms. After within it kills the process
// and fails the test: the command's child pid <why>, followed by the
// command's stderr as it is then when stderr is not nil.
func waitGone(t *testing.T, pid int, within time.Duration, why string, stderr fmt.Stringer) {
	t.Helper()
	for deadline := time.Now().Add(within); ; time.Sleep(20 * time.Millisecond) {
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) || isZombie(pid) {
			return
		}
		if time.Now().After(deadline) {
			if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
				t.Errorf("killing the command's child %d: %v", pid, err)
			}
			if stderr != nil {
				why += "; stderr:\n" + stderr.String()
			}
			t.Fatalf("the command's child %d %s", pid, why)
		}
	}
}

// isZombie reports whether pid has exited but not been reaped yet.
func isZombie(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// The state follows the command name in parentheses.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i > 0 && i+2 < len(s) && s[i+2] == 'Z'
}

func TestTailBuffer(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		max    int
		writes []string
		want   string
	}{
		{"short", 10, []string{"abc", "def"}, "abcdef"},
		{"exact", 6, []string{"abc", "def"}, "abcdef"},
		{"cut", 4, []string{"abc", "def"}, "…cdef"},
		{"cut in one write", 3, []string{"abcdefgh"}, "…fgh"},
		{"no split rune", 4, []string{"xxé€"}, "…€"}, // keeping 4 bytes would start inside é
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := &tailBuffer{max: tc.max}
			for _, w := range tc.writes {
				b.Write([]byte(w))
			}
			if got := b.String(); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

// TestExecRunnerBackgroundChild: a command that leaves a background process
// holding its stderr is judged by its own exit status once the wait for the
// output ends (waitDelay): exit 0 completes, anything else fails with the
// stderr written so far.
func TestExecRunnerBackgroundChild(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		command string
		wantErr []string // nil: success
	}{
		{"exit 0", `sleep 30 & echo $! > PIDFILE; echo started`, nil},
		{"exit 3", `sleep 30 & echo $! > PIDFILE; echo 'gave up' >&2; exit 3`, []string{"exit status 3", "gave up"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			pidFile := filepath.Join(t.TempDir(), "pid")
			t.Cleanup(func() {
				if b, err := os.ReadFile(pidFile); err == nil {
					if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
						syscall.Kill(pid, syscall.SIGKILL)
					}
				}
			})
			command := strings.ReplaceAll(tc.command, "PIDFILE", "'"+pidFile+"'")
			r := &execRunner{command: command, waitDelay: 300 * time.Millisecond}
			start := time.Now()
			err := r.run(context.Background(), execJob{ID: 7})
			if d := time.Since(start); d > 10*time.Second {
				t.Errorf("run took %v; the background child was waited for", d)
			}
			if tc.wantErr == nil && err != nil {
				t.Fatalf("error %v, want none: the command exited 0", err)
			}
			for _, w := range tc.wantErr {
				if err == nil || !strings.Contains(err.Error(), w) {
					t.Errorf("error %v does not contain %q", err, w)
				}
			}
		})
	}
}

// failingWriter refuses every write, as stdout on a full disk does.
type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) {
	return 0, errors.New("write /dev/stdout: no space left on device")
}

// TestExecRunnerUnwritableOutput checks that a worker whose own stdout or
// stderr cannot be written (a full disk, a closed pipe) still judges each
// command by its exit status: the output passed through is lost, but the
// command is neither cut off (its pipe closed, SIGPIPE) nor failed for it,
// and a failure's error still holds the end of its stderr.
func TestExecRunnerUnwritableOutput(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name           string
		stdout, stderr bool // which of the worker's streams fail
		command        string
		wantErr        []string // nil: success
	}{
		{"stdout, exit 0", true, false, "echo hello; echo again", nil},
		{"stdout, more than a pipe holds, exit 0", true, false, "head -c 300000 /dev/zero; echo done", nil},
		{"stderr, exit 0", false, true, "echo note >&2; echo more >&2", nil},
		{"stderr, more than a pipe holds, exit 3", false, true, "head -c 300000 /dev/zero | tr '\\0' x >&2; echo >&2; echo 'the real reason' >&2; exit 3", []string{"exit status 3", "the real reason"}},
		{"both, exit 0", true, true, "echo out; echo err >&2; echo out; echo err >&2", nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := &execRunner{command: tc.command, stdout: io.Discard, stderr: io.Discard}
			if tc.stdout {
				r.stdout = failingWriter{}
			}
			if tc.stderr {
				r.stderr = failingWriter{}
			}
			err := r.run(context.Background(), execJob{ID: 1})
			msg := fmt.Sprint(err)
			if len(msg) > 200 { // the start and the end say enough
				msg = msg[:100] + " ... " + msg[len(msg)-100:]
			}
			if tc.wantErr == nil && err != nil {
				t.Fatalf("error %s, want none: the command exited 0", msg)
			}
			for _, w := range tc.wantErr {
				if err == nil || !strings.Contains(err.Error(), w) {
					t.Errorf("error %s does not contain %q", msg, w)
				}
			}
		})
	}
}

// TestExecRunnerExitBeforeCancel: a command that exited 0 on its own, and
// whose background child still holds its output, is judged by its exit
// status even when the job's context ends while the runner waits for that
// output (the worker's grace passing, say): it completes, rather than
// being reported as killed (its job released, to run again).
func TestExecRunnerExitBeforeCancel(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	shellFile, childFile := filepath.Join(dir, "shell.pid"), filepath.Join(dir, "child.pid")
	r := &execRunner{
		command:   "sleep 30 & echo $! > " + childFile + "; echo $$ > " + shellFile + "; exit 0",
		waitDelay: 3 * time.Second,
	}
	t.Cleanup(func() {
		if b, err := os.ReadFile(childFile); err == nil {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
				syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	})
	ctx, cancel := context.WithCancelCause(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.run(ctx, execJob{ID: 7}) }()
	var shell int
	testwait.Until(t, 10*time.Second, 20*time.Millisecond, func() bool {
		b, err := os.ReadFile(shellFile)
		if err != nil || !strings.HasSuffix(string(b), "\n") {
			return false
		}
		if shell, err = strconv.Atoi(strings.TrimSpace(string(b))); err != nil {
			t.Fatalf("the pid file holds %q: %v", b, err)
		}
		return true
	}, func() string { return "the command did not start" })
	// Once the shell is reaped, the runner has its exit status and only
	// waits for the output the child holds.
	waitGone(t, shell, 10*time.Second, "(the shell) did not exit", nil)
	testwait.Until(t, 10*time.Second, 20*time.Millisecond, func() bool {
		return errors.Is(syscall.Kill(shell, 0), syscall.ESRCH)
	}, func() string { return "the shell was not reaped" })
	cancel(errors.New("worker shut down"))
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("error %v, want none: the command exited 0 before the context ended", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("run did not return")
	}
}
