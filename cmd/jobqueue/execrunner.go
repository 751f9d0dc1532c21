package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// stderrTail is how much of the end of a command's stderr becomes the job's
// error when the command fails.
const stderrTail = 2048

// defaultWaitDelay is execRunner.waitDelay's default. It must stay well
// under the 5 s a stopping worker waits for handlers after cancelling them
// (queue's abandonGrace): a command killed at the end of the grace returns
// at most this long after the kill, so that its job is released rather than
// left in_progress until its lease with the worker exiting 1.
const defaultWaitDelay = 2 * time.Second

// execJob is what the exec runner needs of a job.
type execJob struct {
	ID      int64
	Name    string
	Type    string
	Attempt int
	Payload []byte
}

// secretEnv are the environment variables the CLI reads that may hold a
// secret: the database URL (its password) and the dashboard's password. The
// commands of work --exec do not get them unless --pass-env names them.
func secretEnv() []string { return []string{"JOBQUEUE_DB", envWebPassword} }

// commandEnv is environ (NAME=value entries) without the variables of
// secretEnv, except those named in pass: the environment a job's command
// starts from.
func commandEnv(environ, pass []string) []string {
	env := make([]string, 0, len(environ))
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if slices.Contains(secretEnv(), name) && !slices.Contains(pass, name) {
			continue
		}
		env = append(env, kv)
	}
	return env
}

// checkPassEnv refuses a --pass-env name that is not one of secretEnv: the
// other variables reach the commands anyway.
func checkPassEnv(names []string) error {
	for _, n := range names {
		if !slices.Contains(secretEnv(), n) {
			return usagef("--pass-env %q: only %s are kept from the commands (every other variable reaches them anyway); name one of these", n, strings.Join(secretEnv(), " and "))
		}
	}
	return nil
}

// execRunner runs a shell command for each job: the payload on stdin, the
// job in JOB_ID, JOB_NAME, JOB_TYPE and JOB_ATTEMPT in the worker's
// environment without the secrets (commandEnv); exit status 0 completes
// the job, anything else fails it with the end of its stderr. The command runs
// in its own process group, killed as a whole when the job's context ends.
type execRunner struct {
	// command is run as `sh -c command`.
	command string
	// passEnv names the variables of secretEnv that the command gets all
	// the same (--pass-env); the others of secretEnv are removed from its
	// environment.
	passEnv []string
	// stdout and stderr receive the command's output (stderr is also kept
	// for the error); nil discards it.
	stdout, stderr io.Writer
	// waitDelay bounds how long to wait for the output pipes after the
	// command exits or its process group is killed (a background process
	// it started, or a grandchild that escaped the group, could otherwise
	// hold them open); defaultWaitDelay when zero.
	waitDelay time.Duration
	// log, when set, hears (once per stream) that stdout or stderr could
	// not be written.
	log *slog.Logger
	// stdoutFailed and stderrFailed log that once.
	stdoutFailed, stderrFailed sync.Once
	// children starts and waits for the commands: a worker that is PID 1
	// reaps the orphans they leave behind, never the commands themselves
	// (see children). Nil: started and waited for plainly.
	children *children
}

// run runs the command for job and returns nil when it exits 0.
func (r *execRunner) run(ctx context.Context, job execJob) error {
	cmd := exec.CommandContext(ctx, "sh", "-c", r.command)
	cmd.Stdin = bytes.NewReader(job.Payload)
	cmd.Env = append(commandEnv(os.Environ(), r.passEnv),
		"JOB_ID="+strconv.FormatInt(job.ID, 10),
		"JOB_NAME="+job.Name,
		"JOB_TYPE="+job.Type,
		"JOB_ATTEMPT="+strconv.Itoa(job.Attempt),
	)
	tail := &tailBuffer{max: stderrTail}
	// The output is passed through whether or not it can be written: a
	// write error would end the copy, close the command's pipe (SIGPIPE on
	// its next write) and fail a command that exited 0.
	cmd.Stdout = r.passThrough(r.stdout, &r.stdoutFailed, "stdout")
	cmd.Stderr = io.MultiWriter(tail, r.passThrough(r.stderr, &r.stderrFailed, "stderr"))
	// Its own process group, so that whatever the shell starts is killed too.
	ownProcessGroup(cmd)
	cmd.Cancel = func() error { return killProcessGroup(cmd) }
	cmd.WaitDelay = r.waitDelay
	if cmd.WaitDelay == 0 {
		cmd.WaitDelay = defaultWaitDelay
	}
	err := r.children.start(cmd)
	if err == nil {
		err = r.children.wait(cmd)
	}
	if errors.Is(err, exec.ErrWaitDelay) && cmd.ProcessState != nil && cmd.ProcessState.Success() {
		// The command exited 0, but something it left running in the
		// background still held its stderr after waitDelay: the exit
		// status decides (SPEC: exit 0 completes), also when the job's
		// context ended during that wait (a kill would have left it no
		// exit status 0).
		err = nil
	}
	if err == nil {
		return nil
	}
	if ctxErr := ctx.Err(); ctxErr != nil {
		return fmt.Errorf("command killed (%w): %s", context.Cause(ctx), describe(tail.String()))
	}
	var exitErr *exec.ExitError
	if errors.As(err, &exitErr) {
		if msg := strings.TrimSpace(tail.String()); msg != "" {
			return fmt.Errorf("%s: %s", exitErr.ProcessState.String(), msg)
		}
		return fmt.Errorf("%s (no stderr output)", exitErr.ProcessState.String())
	}
	return fmt.Errorf("run %q: %w", r.command, err)
}

func describe(stderr string) string {
	if s := strings.TrimSpace(stderr); s != "" {
		return s
	}
	return "no stderr output"
}

// passThrough is w (the worker's stdout or stderr, nil: discard) for the
// commands' output, never failing: what cannot be written is dropped, and
// the first failure logged, so that the command goes on and its exit status
// alone decides its job's outcome.
func (r *execRunner) passThrough(w io.Writer, failed *sync.Once, stream string) io.Writer {
	if w == nil {
		return io.Discard
	}
	return writerFunc(func(p []byte) (int, error) {
		if _, err := w.Write(p); err != nil && r.log != nil {
			failed.Do(func() {
				r.log.Warn("the commands' "+stream+" cannot be written: their output there is dropped; the jobs' outcome is still their exit status", "err", err)
			})
		}
		return len(p), nil
	})
}

// writerFunc is a function as an io.Writer.
type writerFunc func(p []byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	buf []byte
	cut bool // bytes were dropped from the front
}

// Write keeps the end of p.
func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
		t.cut = true
	}
	return len(p), nil
}

// String is the kept end, starting with "…" when the front was dropped and
// never starting in the middle of a UTF-8 sequence.
func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	b := t.buf
	if !t.cut {
		return string(b)
	}
	for len(b) > 0 && b[0]&0xC0 == 0x80 { // a continuation byte
		b = b[1:]
	}
	return "…" + string(b)
}
