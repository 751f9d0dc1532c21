package main

import (
	"context"
	"testing"
	"time"

	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/testdb"
	"github.com/jobqueue/jobqueue/internal/testwait"
)

// TestUninstallOnStandby: `uninstall`, with and without --force, on a
// PostgreSQL standby fails with one line that says to connect to the
// primary and to run the same command again, nothing dropped. The lock
// under which the jobs are counted is the first write a standby refuses
// ("cannot execute LOCK TABLE during recovery"); without --force that
// refusal said neither that nothing was dropped nor to run the command
// again (and named the table twice), and --force, which takes the lock
// too since the jobs it deletes are counted under it, would have lost
// what its failed DROP said.
func TestUninstallOnStandby(t *testing.T) {
	t.Parallel()
	pair := testdb.PostgresPair(t, false)
	table := testdb.Table(t, nil) // the pair is the test's own
	primary := cli{db: pair.Primary.URL(), table: table, timeout: 2 * time.Minute}
	primary.ok(t, "install")
	standby := testdb.OpenURL(t, pair.Standby.URL())
	quoted := parseTable(t, engine.Postgres, table).Quoted()
	testwait.For(t, time.Minute, 20*time.Millisecond, "the standby to have the table", func() bool {
		var there bool
		if err := standby.QueryRowContext(context.Background(), "SELECT to_regclass($1) IS NOT NULL", quoted).Scan(&there); err != nil {
			t.Errorf("looking for the table on the standby: %v", err)
			return true
		}
		return there
	})
	c := cli{db: pair.Standby.URL(), table: table, timeout: 2 * time.Minute}
	cases := []struct {
		name  string
		args  []string
		again string
	}{
		{"empty only", []string{"uninstall"}, "run 'jobqueue uninstall --table " + table + "' again"},
		{"forced", []string{"uninstall", "--force"}, "run 'jobqueue uninstall --table " + table + " --force' again"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assertOneLineError(t, c.run(t, tc.args...), exitFailure, "cannot execute", "target_session_attrs=read-write", "nothing was dropped", tc.again)
		})
	}
	// Nothing was dropped: the primary still has the table.
	primary.ok(t, "stats")
}
