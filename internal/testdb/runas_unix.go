//go:build unix

package testdb

import (
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"strconv"
	"syscall"
)

// runAsPostgres makes cmd run as the user postgres when the test runs as
// root: PgBouncer and the PostgreSQL server refuse to run as root. It
// returns the uid and gid cmd runs with (the test's own when not root).
func runAsPostgres(cmd *exec.Cmd) (uid, gid int, err error) {
	uid, gid, err = serverUser()
	if err != nil || uid == os.Geteuid() {
		return uid, gid, err
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
	return uid, gid, nil
}

// serverUser is the uid and gid that database servers started by tests run
// as: the test's own, or postgres's when the test runs as root.
func serverUser() (uid, gid int, err error) {
	if os.Geteuid() != 0 {
		return os.Geteuid(), os.Getegid(), nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return 0, 0, fmt.Errorf("the test runs as root, and servers must not: %w (create the user postgres or run the tests as another user)", err)
	}
	uid, _ = strconv.Atoi(u.Uid)
	gid, _ = strconv.Atoi(u.Gid)
	return uid, gid, nil
}
