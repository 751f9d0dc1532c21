package queue

import (
	"context"
	"encoding/json"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jobqueue/jobqueue/internal/engine"
)

// marshalHold holds the encoding of one job of a streamed EnqueueMany (its
// first encoding) until released: by free, or by another encoding that
// starts meanwhile, which it records as an overlap.
type marshalHold struct {
	at               int
	reached, release chan struct{}
	once, freed      sync.Once
	running          atomic.Int32
	overlap          atomic.Bool
}

// free releases the held encoding.
func (h *marshalHold) free() { h.freed.Do(func() { close(h.release) }) }

// heldArgs are args whose encoding marshalHold watches.
type heldArgs struct {
	N    int
	hold *marshalHold
}

func (heldArgs) Kind() string { return "held" }

func (a heldArgs) MarshalJSON() ([]byte, error) {
	h := a.hold
	if h.running.Add(1) > 1 {
		h.overlap.Store(true)
		h.free()
	}
	defer h.running.Add(-1)
	if a.N == h.at {
		first := false
		h.once.Do(func() { first = true })
		if first {
			close(h.reached)
			<-h.release
		}
	}
	return json.Marshal(map[string]int{"n": a.N})
}

// TestEnqueueManyStreamContextEnds: the context of a streamed EnqueueMany
// (its jobs encoded while the COPY runs, in pgx's goroutine that reads
// them) ends while a job is being encoded. pgx's CopyFrom returns at once
// then without waiting for that goroutine, and EnqueueMany went on: it read
// the reader's state while the goroutine still wrote it (a data race, run
// with -race), encoded the rest of the jobs to find a bad one while the
// goroutine encoded the same args, and could return while the goroutine
// still called the codec on the caller's args. Now the COPY's reader is
// stopped, after the encoding under way, before EnqueueMany reads its
// state: one job is encoded at a time, and none after EnqueueMany returns.
// The held encoding goes on when EnqueueMany stops the reader, or when
// another encoding starts (the defect).
func TestEnqueueManyStreamContextEnds(t *testing.T) {
	env := coreEnv(t, engine.Postgres)
	q, _ := coreQueue(t, env)
	h := &marshalHold{at: 100, reached: make(chan struct{}), release: make(chan struct{})}
	q.copyStopping = h.free // EnqueueMany waits for the held encoding
	args := make([]JobArgs, 2000)
	for i := range args {
		args[i] = heldArgs{N: i, hold: h}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type result struct {
		n   int
		err error
	}
	done := make(chan result, 1)
	go func() {
		n, err := q.EnqueueMany(ctx, args)
		done <- result{n, err}
	}()
	waitFor(t, h.reached, 10*time.Second, "job 100 to be encoded")
	cancel()
	res := waitFor(t, done, 10*time.Second, "EnqueueMany to return")
	if res.n != 0 || res.err == nil {
		t.Errorf("EnqueueMany = %d, %v; want 0 and the context's error", res.n, res.err)
	}
	if h.overlap.Load() {
		t.Error("two goroutines encoded the caller's args at once")
	}
	if running := h.running.Load(); running != 0 {
		t.Errorf("%d encodings of the caller's args still run after EnqueueMany returned", running)
	}
	if n := rowCount(t, env); n != 0 {
		t.Errorf("%d rows written, want none", n)
	}
}
