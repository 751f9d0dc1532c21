//go:build !unix

package testdb

import (
	"os"
	"os/exec"
)

// runAsPostgres leaves cmd as it is where there is no root.
func runAsPostgres(*exec.Cmd) (uid, gid int, err error) { return os.Getuid(), os.Getgid(), nil }

// serverUser is the test's own user.
func serverUser() (uid, gid int, err error) { return os.Getuid(), os.Getgid(), nil }
