//go:build unix

package main

import (
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestDemoInterruptedSaysSo: a demo stopped by SIGINT while its worker runs
// fails (exit 1) saying a signal stopped it, not that it ran out of time.
func TestDemoInterruptedSaysSo(t *testing.T) {
	t.Parallel()
	c := sqliteCLI(t)
	cmd := exec.Command(binary, "--db", c.db, "--table", c.table, "demo")
	stdout := &syncBuffer{}
	cmd.Stdout = stdout
	stderr := startCmd(t, cmd)
	eventually(t, time.Minute, "the demo to run its worker", func() bool {
		return strings.Contains(stdout.String(), "3. running a worker")
	})
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if code := waitExit(t, cmd, time.Minute); code != exitFailure {
		t.Fatalf("exit status %d, want %d; stderr: %q", code, exitFailure, stderr.String())
	}
	lines := strings.Split(strings.TrimSuffix(stderr.String(), "\n"), "\n")
	last := lines[len(lines)-1]
	if !strings.Contains(last, "stopped by a signal before it finished") || strings.Contains(last, "in time") {
		t.Fatalf("last line of stderr %q: want it to say a signal stopped the demo, and nothing of a timeout", last)
	}
}
