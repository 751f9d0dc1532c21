package queue

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/testdb"
)

// TestReadOnlyServerErrorsSayWhatToDo: on a PostgreSQL server that accepts
// no writes (a standby that a URL of several hosts without
// target_session_attrs=read-write reached, or, here, a session with
// default_transaction_read_only on), what the queue writes fails with
// `cannot execute … in a read-only transaction`; the error says to connect
// to the primary and to add target_session_attrs=read-write. It said
// nothing of the kind ("jobqueue: enqueue …: ERROR: cannot execute SELECT
// in a read-only transaction (SQLSTATE 25006)").
func TestReadOnlyServerErrorsSayWhatToDo(t *testing.T) {
	ctx := context.Background()
	env := newTestEnv(t, engine.Postgres)
	q := env.queue(t, testdb.OpenURL(t, env.urlWith(t, "options", "-c default_transaction_read_only=on")), WithLogger(testdb.QuietLogger()))
	for _, c := range []struct {
		name string
		op   func() error
	}{
		{"Enqueue", func() error { _, err := q.Enqueue(ctx, emailArgs{To: "a"}); return err }},
		{"EnqueueMany", func() error {
			_, err := q.EnqueueMany(ctx, []JobArgs{emailArgs{To: "a"}, emailArgs{To: "b"}})
			return err
		}},
		{"a claim", func() error { _, err := q.claim(ctx, nil, 10, time.Minute); return err }},
		{"Prune", func() error { _, err := q.Prune(ctx, time.Hour); return err }},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := c.op()
			if err == nil {
				t.Fatal("no error from a read-only server")
			}
			if !strings.Contains(err.Error(), "target_session_attrs=read-write") {
				t.Errorf("%v; want it to say to add target_session_attrs=read-write", err)
			}
		})
	}
}
