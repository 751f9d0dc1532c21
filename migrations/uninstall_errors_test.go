package migrations

import (
	"context"
	"net/url"
	"strings"
	"testing"

	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/testdb"
)

// TestUninstallErrorNamesTableOnce: an uninstall that fails after its
// checks, here because the count of the jobs cannot read the table (its
// owner, a role of the test's own, revoked its own SELECT; a superuser,
// as the other tests connect, is never refused), names the table once,
// then says what failed: "uninstall table X: count its jobs: …". It
// read "uninstall table X: uninstall table X: count its jobs: …" (the
// count, the MySQL look-up of the tables to lock and their unlock named
// it, and Uninstall named it again). Nothing is dropped.
func TestUninstallErrorNamesTableOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	admin := testdb.Open(t, engine.Postgres)
	role := strings.ToLower(testdb.Table(t, nil))
	mustExec(t, admin, "CREATE ROLE "+role+" LOGIN")
	t.Cleanup(func() {
		for _, s := range []string{"DROP OWNED BY " + role + " CASCADE", "DROP ROLE " + role} {
			if _, err := admin.ExecContext(ctx, s); err != nil {
				t.Errorf("%s: %v", s, err)
			}
		}
	})
	mustExec(t, admin, "GRANT CREATE ON SCHEMA public TO "+role)
	u, err := url.Parse(testdb.URL(t, engine.Postgres))
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.User(role)
	owner := testdb.OpenURL(t, u.String())
	name := testdb.Table(t, admin)
	if err := Install(ctx, owner, name); err != nil {
		t.Fatal(err)
	}
	tb := tableOf(t, engine.Postgres, name)
	mustExec(t, owner, "REVOKE SELECT ON "+tb.Quoted()+" FROM "+role)

	err = UninstallEmpty(ctx, owner, name)
	if err == nil {
		t.Fatal("UninstallEmpty of a table its owner may not read succeeded")
	}
	want := "uninstall table " + name + ": count its jobs: "
	if msg := err.Error(); !strings.HasPrefix(msg, want) || strings.Count(msg, "uninstall table") != 1 {
		t.Errorf("UninstallEmpty error %q: want it to start %q and to say \"uninstall table\" once", msg, want)
	}
	if err := Check(ctx, admin, name); err != nil {
		t.Errorf("table after the failed UninstallEmpty: %v", err)
	}
}
