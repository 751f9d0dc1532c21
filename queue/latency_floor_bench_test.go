package queue

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/testdb"
)

// latencyFloorPostgres measures the floor under the queue's
// enqueue-to-start latency on PostgreSQL: the same steps with nothing of
// the queue around them, on three bare pgx connections to env's table (as
// installed, with its indexes). The producer sends one batch, BEGIN; SET
// LOCAL synchronous_commit = off; an INSERT that notifies; COMMIT; then a
// logical message that commits with the WAL flush (as the first Enqueue
// after a quiet spell does: enqueue_postgres_early.go, whose FlushCommits
// makes the job durable before Enqueue returns); a listener waits for the notification and
// claims on a session whose commits do not wait for the flush (as a claim
// session does: store_postgres_claim.go), with one UPDATE of the first
// pending job, locked with SKIP LOCKED and returned. It enqueues
// latencyJobs jobs latencyGap apart, as bench's latency phase does, and
// returns how long each took from before its insert to the claim's
// return. No claimer in another process can start a handler sooner on this
// server (one in the enqueuing process is woken by the COMMIT's result, one
// server process nearer: enqueue_postgres_early.go), so
// BenchmarkEnqueueToStart reports the queue's median next to this one's
// (issue 9's goal of 1 ms is below the floor on some machines).
func latencyFloorPostgres(b *testing.B, env *testEnv) []time.Duration {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	url := testdb.URL(b, engine.Postgres)
	connect := func() *pgx.Conn {
		c, err := pgx.Connect(ctx, url)
		if err != nil {
			b.Fatalf("the latency floor's connection: %v", err)
		}
		b.Cleanup(func() { c.Close(context.Background()) })
		return c
	}
	producer, listener, claimer := connect(), connect(), connect()
	table := pgx.Identifier{env.table}.Sanitize()
	channel := env.table + "_floor"
	if _, err := claimer.Exec(ctx, "SET synchronous_commit = off"); err != nil {
		b.Fatal(err)
	}
	if _, err := listener.Exec(ctx, "LISTEN "+pgx.Identifier{channel}.Sanitize()); err != nil {
		b.Fatal(err)
	}
	claimed := make(chan time.Time)
	failed := make(chan error, 1)
	go func() {
		for {
			if _, err := listener.WaitForNotification(ctx); err != nil {
				failed <- err
				return
			}
			var id int64
			err := claimer.QueryRow(ctx, `UPDATE `+table+` SET status = 'in_progress', attempts = attempts + 1, claim_token = 'floor'
				WHERE id = ANY (ARRAY(SELECT id FROM `+table+` WHERE status = 'pending' AND scheduled_at <= now() AT TIME ZONE 'UTC'
					ORDER BY scheduled_at, id LIMIT 8 FOR UPDATE SKIP LOCKED)) RETURNING id`).Scan(&id)
			if err != nil {
				failed <- err
				return
			}
			claimed <- time.Now()
		}
	}()
	insert := `WITH j AS (INSERT INTO ` + table + ` (name, payload, max_attempts, base_delay, max_delay, scheduled_at, created_at)
		VALUES ('floor', '{}', 3, 60, 3600, now() AT TIME ZONE 'UTC' - interval '1 second', now() AT TIME ZONE 'UTC') RETURNING id)
		SELECT pg_notify($1, '') FROM j`
	lat := make([]time.Duration, 0, latencyJobs)
	for range latencyJobs {
		batch := &pgx.Batch{}
		batch.Queue("BEGIN")
		batch.Queue("SET LOCAL synchronous_commit = off")
		batch.Queue(insert, channel)
		batch.Queue("COMMIT")
		batch.Queue("SELECT pg_logical_emit_message(true, 'jobqueue', 'flush')")
		sent := time.Now()
		if err := producer.SendBatch(ctx, batch).Close(); err != nil {
			b.Fatalf("the latency floor's insert: %v", err)
		}
		select {
		case at := <-claimed:
			lat = append(lat, at.Sub(sent))
		case err := <-failed:
			b.Fatalf("the latency floor's listener: %v", err)
		case <-ctx.Done():
			b.Fatalf("the latency floor's job was not claimed: %v", ctx.Err())
		}
		time.Sleep(latencyGap)
	}
	slices.Sort(lat)
	return lat
}
