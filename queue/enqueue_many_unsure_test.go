package queue

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/testdb"
)

// TestEnqueueManyAnswerLostNotNoneWritten: an EnqueueMany whose COMMIT
// reached the server, which carried it out, but whose answer was lost with
// the connection (a failover, the network failing at that moment) does
// not say "(none written)": its jobs are there. It says they may have been
// written, so that a producer looks before it enqueues them again rather
// than doubling a batch it was told was not written. A batch refused by
// the server still says none was written (TestEnqueueManyAtomic and the
// others).
func TestEnqueueManyAnswerLostNotNoneWritten(t *testing.T) {
	forEachServerEngine(t, func(t *testing.T, kind engine.Kind) {
		env := newTestEnv(t, kind)
		outage, url := testdb.NewOutage(t, kind)
		// Pooled: on PostgreSQL the jobs then go in an INSERT between
		// BEGIN and COMMIT, as on MySQL, not in a COPY (whose commit has
		// no statement of its own for the proxy to see).
		q := env.queue(t, testdb.OpenURL(t, url), WithTransactionPooling(true), WithLogger(testdb.QuietLogger()))
		outage.LoseRepliesAfter("commit")
		done := make(chan error, 1)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_, err := q.EnqueueMany(ctx, []JobArgs{testArgs{N: 1}, testArgs{N: 2}, testArgs{N: 3}})
			done <- err
		}()
		waitUntil(t, 20*time.Second, "the batch to be committed", func() bool { return env.countWhere(t, "1 = 1") == 3 })
		outage.Cut()
		err := waitFor(t, done, 20*time.Second, "EnqueueMany to return")
		if err == nil {
			t.Fatal("EnqueueMany whose answer was lost returned no error")
		}
		if strings.Contains(err.Error(), "none written") || !strings.Contains(err.Error(), "may have been written") {
			t.Errorf("EnqueueMany whose commit went through, its answer lost: %v; want it to say the jobs may have been written", err)
		}
	})
}
