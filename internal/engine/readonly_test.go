package engine_test

import (
	"context"
	"net/url"
	"strings"
	"testing"

	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/testdb"
)

// TestReadOnlyRefusalClosesConnection: a connection of a pool opened by
// Open whose server refuses a write as read-only (here the session has
// default_transaction_read_only on, as every session of an old primary
// fenced after a failover has) is not handed out again: the next statement
// runs on a new session. The pool reused it, and every write given to it
// failed, while new connections would have reached the new primary.
func TestReadOnlyRefusalClosesConnection(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	u, err := url.Parse(testdb.URL(t, engine.Postgres))
	if err != nil {
		t.Fatal(err)
	}
	v := u.Query()
	v.Set("options", "-c default_transaction_read_only=on")
	u.RawQuery = strings.ReplaceAll(v.Encode(), "+", "%20") // pgx reads a '+' as itself
	db := testdb.OpenURL(t, u.String())
	db.SetMaxOpenConns(1)
	pid := func() int {
		t.Helper()
		var p int
		if err := db.QueryRowContext(ctx, "SELECT pg_backend_pid()").Scan(&p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	before := pid()
	_, err = db.ExecContext(ctx, "CREATE TABLE jobqueue_read_only_refusal (i int)")
	if err == nil || !strings.Contains(err.Error(), "25006") {
		t.Fatalf("a write on a read-only session: %v; want SQLSTATE 25006", err)
	}
	if after := pid(); after == before {
		t.Errorf("the session %d that refused a write as read-only was handed out again", before)
	}
}
