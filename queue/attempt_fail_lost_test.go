package queue

import (
	"context"
	"database/sql/driver"
	"errors"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/testdb"
)

// TestLostFailureOfAnotherAttemptNotLanded: a handler's failure whose
// answer was lost (written again after the database came back) finds its
// job ended by another attempt with the same attempts count and the same
// error text, as after a failover that lost the first attempt's claim: the
// job ran again on the new primary and failed the same way. The first
// attempt's failure is refused, and it is the lost attempt's (EventLost,
// the warning), not a failure of its own. Before, failLanded compared only
// the status, the attempts and the error text, and took the other
// attempt's end for the lost write's: both attempts were reported as
// recorded. The test hook after the first write leaves the row as that
// other attempt would (the same status, attempts and error, its own
// finished_at, or for a retry its own scheduled_at) and loses the write's
// answer. Completions are told apart the same way
// (TestLostAnswerOfAnotherAttemptNotLanded).
func TestLostFailureOfAnotherAttemptNotLanded(t *testing.T) {
	cases := []struct {
		name string
		// err is the handler's error.
		err error
		// other is the other attempt's end, written over the first write's
		// (?: its time).
		other string
		// at is the other attempt's time, from now.
		at   time.Duration
		want Status
	}{
		{
			name:  "failed for good",
			err:   Permanent(errors.New("handler error: bad address")),
			other: "UPDATE {t} SET status = 'failed', claim_token = NULL, lease_until = NULL, finished_at = ? WHERE id = ?",
			at:    -time.Minute,
			want:  StatusFailed,
		},
		{
			// A retry an hour on: the first write's scheduled_at; the
			// other attempt's is two hours on, so that no claim takes the
			// job meanwhile (its attempts would then tell it apart).
			name:  "retried",
			err:   RetryAfter(time.Hour, errors.New("handler error: try later")),
			other: "UPDATE {t} SET status = 'pending', claim_token = NULL, lease_until = NULL, scheduled_at = ? WHERE id = ?",
			at:    2 * time.Hour,
			want:  StatusPending,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			forEachEngine(t, func(t *testing.T, kind engine.Kind) {
				env := newTestEnv(t, kind)
				logs := &testdb.LogRecorder{}
				var lost atomic.Bool
				var id int64
				other := time.Now().UTC().Add(tc.at).Truncate(time.Second)
				hookErr := make(chan error, 1)
				events := newEventLog()
				q := env.queue(t, nil, WithLogger(slog.New(logs)), WithListener(events.listen),
					withAfterFailHook(func(err error) error {
						if err != nil || !lost.CompareAndSwap(false, true) {
							return err
						}
						// Another attempt (attempts 1 too) ended the job
						// with the same error at another time.
						_, xerr := env.db.ExecContext(context.Background(), env.sql(tc.other), kind.TimeArg(other), id)
						hookErr <- xerr
						return driver.ErrBadConn // this write's answer lost
					}))
				id = enqueue(t, q, testArgs{N: 1})
				cfg := fastConfig()
				cfg.MaintenanceInterval = -1
				w := q.NewWorker(cfg)
				Handle(w, func(ctx context.Context, job *Job[testArgs]) error { return tc.err })
				stop, _ := startWorker(t, w)
				waitUntil(t, 20*time.Second, "the attempt to end", func() bool {
					return events.count(EventFailed)+events.count(EventLost) > 0
				})
				if err := stop(10 * time.Second); err != nil {
					t.Fatal(err)
				}
				if !lost.Load() {
					t.Fatal("no failure's answer was lost; the test shows nothing")
				}
				if err := <-hookErr; err != nil {
					t.Fatalf("ending the job as another attempt: %v", err)
				}
				job := getJob(t, q, id)
				if job.Status != tc.want || job.Attempts != 1 || job.Error != errorText(tc.err) {
					t.Errorf("job %d: status %s, attempts %d, error %q; want %s, 1, %q", id, job.Status, job.Attempts, job.Error, tc.want, errorText(tc.err))
				}
				if f, l := events.count(EventFailed), events.count(EventLost); f != 0 || l != 1 {
					t.Errorf("%d EventFailed and %d EventLost for an attempt whose job another ended, want 0 and 1", f, l)
				}
				if n := logs.Count(slog.LevelWarn, "lost the job"); n != 1 {
					t.Errorf("the worker warned %d times \"lost the job\", want once: %q", n, logs.Lines(slog.LevelWarn))
				}
			})
		})
	}
}
