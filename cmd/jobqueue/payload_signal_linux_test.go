package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestEnqueuePayloadStdinInterrupted: `enqueue --payload -` waiting for a
// stdin that nothing writes to (a terminal, say) stops at the first SIGINT,
// exit 1 with the line every interrupted command gives, and enqueues
// nothing. The read held it: Ctrl-C had to be pressed three times.
func TestEnqueuePayloadStdinInterrupted(t *testing.T) {
	t.Parallel()
	c := sqliteCLI(t)
	c.ok(t, "install")
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close() // open until the end: stdin never ends
	cmd := exec.Command(binary, "--db", c.db, "--table", c.table, "enqueue", "--name", "k", "--payload", "-")
	cmd.Stdin = r
	stderr := startCmd(t, cmd)
	eventually(t, 30*time.Second, "the enqueue to read its stdin", func() bool { return readingStdin(t, cmd.Process.Pid) })
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	code := waitExit(t, cmd, 30*time.Second)
	assertOneLineError(t, result{code: code, stderr: stderr.String()}, exitFailure, "stopped by a signal before it finished")
	assertStats(t, c, "", map[string]int64{})
}

// readingStdin reports whether a thread of the process pid is in a read of
// its file descriptor 0 (/proc/PID/task/TID/syscall: the syscall's number,
// then its arguments).
func readingStdin(t *testing.T, pid int) bool {
	t.Helper()
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/syscall", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range tasks {
		b, err := os.ReadFile(path)
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ESRCH) {
			continue // the thread ended
		}
		if errors.Is(err, fs.ErrPermission) {
			// Yama or a container may hide it: nothing to wait on.
			t.Skipf("cannot read %s: %v", path, err)
		}
		if err != nil {
			t.Fatal(err)
		}
		f := strings.Fields(string(b))
		if len(f) >= 2 && f[0] == fmt.Sprint(syscall.SYS_READ) && f[1] == "0x0" {
			return true
		}
	}
	return false
}
