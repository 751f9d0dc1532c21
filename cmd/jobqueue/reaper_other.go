//go:build !linux

package main

import (
	"log/slog"
	"os"
)

// startReaper returns the registry through which the worker starts its
// commands (see children); it reaps nothing here (Linux only). A worker
// that is PID 1 warns that it does not reap the orphans of its commands.
func startReaper(log *slog.Logger, proc string) (c *children, stop func()) {
	if os.Getpid() == 1 {
		log.Warn("running as PID 1: the processes the commands leave behind (background ones whose shell exited) stay zombies, as this worker reaps them only on Linux; run it under an init")
	}
	return &children{}, func() {}
}
