package queue

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/jobqueue/jobqueue/internal/engine"
)

// TestEnqueueManyStreamBadJob: on PostgreSQL EnqueueMany checks its jobs
// while its COPY runs (streamMany); a bad job far into the call (chunks of
// rows already sent) aborts the COPY: nothing is written and the error is
// the job's, naming its index, as when every job was checked first. When
// the write fails before the COPY reaches the bad job (here: the context
// is cancelled), the bad job's error is still the one returned.
func TestEnqueueManyStreamBadJob(t *testing.T) {
	env := coreEnv(t, engine.Postgres)
	var sc stmtCounter
	q, _ := coreQueue(t, env, withStatementHook(sc.observe))
	args := make([]JobArgs, 2000)
	for i := range args {
		args[i] = testArgs{N: i, Text: strings.Repeat("x", 100)}
	}
	args[1500] = badArgs{C: make(chan int)}
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	for _, c := range []struct {
		name     string
		ctx      context.Context
		wantCopy int
	}{
		{"bad job after chunks were sent", context.Background(), 1},
		{"write failed first", cancelled, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			sc.reset()
			n, err := q.EnqueueMany(c.ctx, args, Type("s"))
			if n != 0 || !errors.Is(err, ErrPayloadRejected) || !strings.Contains(err.Error(), "job 1500 of 2000") {
				t.Errorf("EnqueueMany = %d, %v; want 0 and ErrPayloadRejected naming job 1500 of 2000", n, err)
			}
			if got := sc.countWith("COPY "); got != c.wantCopy {
				t.Errorf("%d COPY statements, want %d", got, c.wantCopy)
			}
			if n := rowCount(t, env); n != 0 {
				t.Errorf("%d rows written, want none", n)
			}
		})
	}
	// The queue goes on: the same call without the bad job writes all.
	args[1500] = testArgs{N: 1500}
	if n, err := q.EnqueueMany(context.Background(), args, Type("s")); err != nil || n != len(args) {
		t.Fatalf("EnqueueMany = %d, %v", n, err)
	}
	if n := rowCount(t, env); n != len(args) {
		t.Errorf("%d rows, want %d", n, len(args))
	}
}
