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

// TestNoWritableHostSaysFailover: Open on a URL whose hosts all answer
// but none accepts writes (target_session_attrs=read-write; here the one
// host's sessions have default_transaction_read_only on, as a standby's
// are while a failover has not promoted it yet) says so, and that a
// command works again once a primary is back, instead of only "check that
// the server runs and the URL is right", which sent the user to look for
// a typo during a failover. The cause is kept.
func TestNoWritableHostSaysFailover(t *testing.T) {
	t.Parallel()
	u, err := url.Parse(testdb.URL(t, engine.Postgres))
	if err != nil {
		t.Fatal(err)
	}
	testdb.OpenURL(t, u.String()) // skips or fails the test if the server is down
	for _, c := range []struct {
		name     string
		readOnly bool
		want     string
	}{
		{"no host accepts writes", true, "no host of the URL accepts writes"},
		{"the server is down", false, "check that the server runs"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			v := u.Query()
			v.Set("target_session_attrs", "read-write")
			w := *u
			if c.readOnly {
				v.Set("options", "-c default_transaction_read_only=on")
			} else {
				w.Host = "127.0.0.1:1" // nothing listens there
			}
			w.RawQuery = strings.ReplaceAll(v.Encode(), "+", "%20")
			db, _, err := engine.Open(context.Background(), w.String())
			if err == nil {
				db.Close()
				t.Fatalf("Open on %s worked", engine.SafeURL(w.String()))
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("Open's error %q does not say %q", err, c.want)
			}
			if c.readOnly && !strings.Contains(err.Error(), "read only connection") {
				t.Errorf("Open's error %q lost its cause", err)
			}
		})
	}
}
