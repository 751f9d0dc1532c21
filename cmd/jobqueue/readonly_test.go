package main

import (
	"net/url"
	"strings"
	"testing"

	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/testdb"
)

// TestReadOnlyServerError: commands that write, on a PostgreSQL connection
// that accepts no writes (a standby reached without
// target_session_attrs=read-write; here default_transaction_read_only on),
// fail with one line that says to connect to the primary and add
// target_session_attrs=read-write; they said only `cannot execute … in a
// read-only transaction`.
func TestReadOnlyServerError(t *testing.T) {
	direct := testdb.Open(t, engine.Postgres)
	table := testdb.Table(t, direct)
	u, err := url.Parse(testdb.URL(t, engine.Postgres))
	if err != nil {
		t.Fatal(err)
	}
	rw := cli{db: u.String(), table: table}
	rw.ok(t, "install")
	v := u.Query()
	v.Set("options", "-c default_transaction_read_only=on")
	u.RawQuery = strings.ReplaceAll(v.Encode(), "+", "%20") // pgx reads a '+' as itself
	ro := cli{db: u.String(), table: table}
	for _, c := range []struct {
		args  []string
		extra []string // more the line must say
	}{
		{args: []string{"enqueue", "--name", "n"}},
		{args: []string{"prune", "--older-than", "1h"}},
		{args: []string{"--table", table + "_new", "install"}},
		// uninstall told a CLI user to "run Uninstall again" (the Go API's
		// name) and to remove what stands in the way.
		{args: []string{"uninstall", "--force"}, extra: []string{"nothing was dropped", "run 'jobqueue uninstall --table " + table + " --force' again"}},
		// Without --force the same (on a standby the lock under which
		// the jobs are counted is refused first, explained alike).
		{args: []string{"uninstall"}, extra: []string{"nothing was dropped", "run 'jobqueue uninstall --table " + table + "' again"}},
	} {
		t.Run(c.args[0], func(t *testing.T) {
			r := ro.run(t, c.args...)
			assertOneLineError(t, r, 1, append([]string{"cannot execute", "target_session_attrs=read-write"}, c.extra...)...)
			for _, bad := range []string{"Uninstall again", "standing in the way"} {
				if strings.Contains(r.stderr, bad) {
					t.Errorf("stderr %q says %q", r.stderr, bad)
				}
			}
		})
	}
}
