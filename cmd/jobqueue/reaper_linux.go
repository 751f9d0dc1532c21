//go:build linux

package main

import (
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// startReaper returns the registry through which the worker starts its
// commands (see children) and, when the worker is PID 1 (a container
// without an init), reaps the orphans they leave behind: a background
// process whose shell exited becomes PID 1's child, and without a wait
// would stay a zombie. It reaps at once, on each SIGCHLD and after each of
// the commands is waited for, until stop. The zombies are found in proc
// (/proc), which must be the worker's PID namespace's; when it is not, the
// worker does not reap and warns.
func startReaper(log *slog.Logger, proc string) (c *children, stop func()) {
	c = &children{}
	if os.Getpid() != 1 {
		return c, func() {}
	}
	if !procIsOurs(proc) {
		log.Warn("running as PID 1, but " + proc + " is not this PID namespace's (mount it, e.g. unshare --mount-proc): the processes the commands leave behind (background ones whose shell exited) are not reaped and stay zombies; mount proc or run the worker under an init (docker run --init, tini)")
		return c, func() {}
	}
	c.reap = func(started map[int]*exec.Cmd) { reapOrphans(log, proc, started) }
	sigchld := make(chan os.Signal, 1)
	signal.Notify(sigchld, syscall.SIGCHLD)
	done, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		c.reapNow() // whatever was there before SIGCHLD was caught
		for {
			select {
			case <-sigchld:
				c.reapNow()
			case <-done:
				return
			}
		}
	}()
	return c, func() {
		signal.Stop(sigchld)
		close(done)
		<-stopped
	}
}

// procIsOurs reports whether proc shows this process under its own pid,
// that is, whether it is the proc of this process's PID namespace.
func procIsOurs(proc string) bool {
	self, err := os.Readlink(filepath.Join(proc, "self"))
	return err == nil && self == strconv.Itoa(os.Getpid())
}

// reapOrphans reaps the zombie children of PID 1 listed in proc whose pids
// are not in started (the commands waited for through os/exec, which must
// keep their exit status).
func reapOrphans(log *slog.Logger, proc string, started map[int]*exec.Cmd) {
	entries, err := os.ReadDir(proc)
	if err != nil {
		log.Warn("reaping orphans: cannot list processes", "err", err)
		return
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == 1 || started[pid] != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join(proc, e.Name(), "stat"))
		if err != nil || !zombieOfInit(string(stat)) {
			continue // gone meanwhile, or not a zombie child of ours
		}
		var ws syscall.WaitStatus
		if _, err := syscall.Wait4(pid, &ws, syscall.WNOHANG, nil); err != nil && !errors.Is(err, syscall.ECHILD) {
			log.Warn("reaping orphan", "pid", pid, "err", err)
		}
	}
}

// zombieOfInit reports whether stat, the content of /proc/<pid>/stat, is
// that of a zombie (state Z) whose parent is PID 1.
func zombieOfInit(stat string) bool {
	// "pid (comm) state ppid …": comm may hold spaces and parentheses,
	// the last ')' ends it.
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return false
	}
	fields := strings.Fields(stat[i+1:])
	return len(fields) >= 2 && fields[0] == "Z" && fields[1] == "1"
}
