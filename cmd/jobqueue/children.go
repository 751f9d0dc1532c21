package main

import (
	"os/exec"
	"sync"
)

// children is the registry of the commands a worker starts and waits for
// through os/exec. When the worker is PID 1 (a container without an init)
// it also reaps the orphans those commands leave behind (reaper_linux.go),
// and must never reap one of the registered commands: exec.Cmd.Wait would
// then fail (ECHILD) and the command's exit status, which decides its job's
// outcome, would be lost. Every os/exec command a worker process runs must
// therefore be started and waited for through start and wait. A nil
// *children, or one that does not reap, starts and waits plainly.
type children struct {
	// mu is held across a command's Start and its registration, and by
	// each reaping pass: no pass can see a registered command's pid before
	// it is registered.
	mu sync.Mutex
	// started maps the pid of each started command not yet waited for to
	// its Cmd (a pid reused once the command was waited for must not
	// unregister the new command).
	started map[int]*exec.Cmd
	// reap, when set, reaps the zombie children whose pids are not in
	// started; called with mu held.
	reap func(started map[int]*exec.Cmd)
}

// start starts cmd and, when c reaps, registers its pid in the same hold of
// the lock.
func (c *children) start(cmd *exec.Cmd) error {
	if c == nil || c.reap == nil {
		return cmd.Start()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := cmd.Start(); err != nil {
		return err
	}
	if c.started == nil {
		c.started = make(map[int]*exec.Cmd)
	}
	c.started[cmd.Process.Pid] = cmd
	return nil
}

// wait waits for cmd, started by start, unregisters it, and reaps what
// became a zombie meanwhile (its orphans).
func (c *children) wait(cmd *exec.Cmd) error {
	err := cmd.Wait()
	if c == nil || c.reap == nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.started[cmd.Process.Pid] == cmd {
		delete(c.started, cmd.Process.Pid)
	}
	c.reap(c.started)
	return err
}

// reapNow runs one reaping pass (on SIGCHLD).
func (c *children) reapNow() {
	if c == nil || c.reap == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.reap(c.started)
}
