package queue

import (
	"context"
	"encoding/json"
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

// TestEnqueueManyCopyRefusedByServer: a payload the client's checks pass
// but PostgreSQL refuses (a number beyond numeric) aborts either COPY of
// EnqueueMany, the streamed one (the call's options) and the one of checked
// jobs (a job with options of its own): ErrPayloadRejected, nothing
// written, and the same calls without it write every job.
func TestEnqueueManyCopyRefusedByServer(t *testing.T) {
	env := coreEnv(t, engine.Postgres)
	var sc stmtCounter
	q, _ := coreQueue(t, env, withStatementHook(sc.observe))
	refused := RawArgs{Name: "raw", Payload: json.RawMessage(`[1e1000000]`)}
	fine := RawArgs{Name: "raw", Payload: json.RawMessage(`[1]`)}
	for _, c := range []struct {
		name string
		args func(last JobArgs) []JobArgs
	}{
		{"streamed", func(last JobArgs) []JobArgs { return []JobArgs{testArgs{N: 1}, testArgs{N: 2}, last} }},
		{"checked first", func(last JobArgs) []JobArgs {
			return []JobArgs{testArgs{N: 1}, WithOptions(testArgs{N: 2}, Type("own")), last}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := rowCount(t, env)
			sc.reset()
			n, err := q.EnqueueMany(context.Background(), c.args(refused), Type("s"))
			if n != 0 || !errors.Is(err, ErrPayloadRejected) || !strings.Contains(err.Error(), "none written") {
				t.Errorf("EnqueueMany = %d, %v; want 0 and ErrPayloadRejected saying none was written", n, err)
			}
			if got := sc.countWith("COPY "); got != 1 {
				t.Errorf("%d COPY statements, want 1", got)
			}
			if n := rowCount(t, env); n != before {
				t.Errorf("%d rows after the refused call, want %d", n, before)
			}
			if n, err := q.EnqueueMany(context.Background(), c.args(fine), Type("s")); err != nil || n != 3 {
				t.Fatalf("EnqueueMany without the refused payload = %d, %v", n, err)
			}
			if n := rowCount(t, env); n != before+3 {
				t.Errorf("%d rows, want %d", n, before+3)
			}
		})
	}
}
