package queue

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/testdb"
)

// TestEarlyCommitAskedAgainAfterAFailure: when the question whether the
// session may run FlushCommits (askEarly, at the first Enqueue after a
// quiet spell) fails because the connection was lost (here: the server
// ended the pool's idle sessions, as a restart does, and the pool does not
// ping them before use), the queue asks again at the next such Enqueue,
// which then commits early. It took any failure for a "no", for the life
// of the queue: every first Enqueue after a quiet spell waited for its WAL
// flush from then on, and no enqueue ran an idle worker's claim
// (takesOffers), after a single lost connection.
func TestEarlyCommitAskedAgainAfterAFailure(t *testing.T) {
	ctx := context.Background()
	admin := testdb.Open(t, engine.Postgres)
	env := newTestEnv(t, engine.Postgres)
	app := strings.ToLower(env.table) // the application_name of the pool's sessions
	cfg, err := pgx.ParseConfig(env.urlWith(t, "application_name", app))
	if err != nil {
		t.Fatal(err)
	}
	db := stdlib.OpenDB(*cfg, stdlib.OptionShouldPing(func(context.Context, stdlib.ShouldPingParams) bool { return false }))
	t.Cleanup(func() { db.Close() })
	db.SetMaxIdleConns(1)
	logs := &testdb.LogRecorder{}
	sent := newStatementNames("InsertJobNotify", "InsertJob", "FlushCommits")
	q, err := New(db, WithTable(env.table), WithLogger(slog.New(logs)), withStatementHook(sent.hook))
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()

	// The server ends the pool's sessions; the pool still holds one idle.
	if _, err := admin.ExecContext(ctx, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1", app); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 10*time.Second, "the pool's sessions to end", func() bool {
		var n int
		if err := admin.QueryRowContext(ctx, "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1", app).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n == 0
	})
	waitNotifierIdle(t, q)
	if _, err := q.Enqueue(ctx, testArgs{N: 1}); err != nil {
		t.Logf("the Enqueue on the lost connection: %v", err) // it may fail with it
	}
	// The role may run FlushCommits (a superuser): only a failed question
	// keeps the first Enqueue from committing early.
	first := strings.Join(sent.take(), " ")
	if strings.Contains(first, "FlushCommits") {
		t.Fatalf("the first Enqueue sent %q: it committed early on the lost connection, so the test shows nothing", first)
	}
	waitNotifierIdle(t, q)
	if _, err := q.Enqueue(ctx, testArgs{N: 2}); err != nil {
		t.Fatalf("Enqueue after the lost connection: %v", err)
	}
	if got, want := strings.Join(sent.take(), " "), "InsertJobNotify FlushCommits"; got != want {
		t.Errorf("the first Enqueue sent %q, the next %q; want the next to ask again and commit early: %q; logs: %q",
			first, got, want, logs.Lines(slog.LevelInfo))
	}
}
