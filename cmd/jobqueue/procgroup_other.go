//go:build !unix

package main

import "os/exec"

// ownProcessGroup does nothing where there are no Unix process groups.
func ownProcessGroup(cmd *exec.Cmd) {}

// killProcessGroup kills the command itself (no process groups here; what
// it started may survive).
func killProcessGroup(cmd *exec.Cmd) error { return cmd.Process.Kill() }
