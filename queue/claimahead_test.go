package queue

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/testdb"
)

// TestClaimAheadSize: the buffer beyond Concurrency holds about what the
// executors finish during one claim round trip, within its cap, and
// nothing for long handlers or before anything was measured.
func TestClaimAheadSize(t *testing.T) {
	cases := []struct {
		name      string
		conc      int
		rtt, dur  time.Duration
		rttKnown  bool
		durKnown  bool
		wantAhead int
		cancelNow bool // ShutdownTimeout negative
		payload   int  // average payload length in bytes (0: none claimed yet)
	}{
		{"nothing measured yet", 8, 0, 0, false, false, 0, false, 0},
		{"no handler returned yet", 8, 2 * time.Millisecond, 0, true, false, 0, false, 0},
		{"no full claim yet", 8, 0, 100 * time.Microsecond, false, true, 0, false, 0},
		{"long handlers", 8, 2 * time.Millisecond, claimAheadMaxHandler, true, true, 0, false, 0},
		{"handlers as long as a claim", 8, 2 * time.Millisecond, 2 * time.Millisecond, true, true, 8, false, 0},
		{"handlers half a claim", 8, 2 * time.Millisecond, time.Millisecond, true, true, 16, false, 0},
		{"no-op handlers, capped", 8, 2 * time.Millisecond, 0, true, true, claimAheadMin, false, 0},
		{"high concurrency caps at concurrency", claimAheadMin + 50, 2 * time.Millisecond, 0, true, true, claimAheadMin + 50, false, 0},
		{"cap never above one claim", 5000, 2 * time.Millisecond, 0, true, true, maxClaim, false, 0},
		{"shutdown cancels at once", 8, 2 * time.Millisecond, 0, true, true, 0, true, 0},
		{"small payloads: the cap", 8, 2 * time.Millisecond, 0, true, true, claimAheadMin, false, 100},
		{"1 MB payloads: 32 MB ahead", 8, 2 * time.Millisecond, 0, true, true, 32, false, 1 << 20},
		{"payloads above the bound: nothing ahead", 8, 2 * time.Millisecond, 0, true, true, 0, false, 64 << 20},
		{"handlers' need below the byte bound", 8, 2 * time.Millisecond, time.Millisecond, true, true, 16, false, 1 << 20},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := WorkerConfig{Concurrency: tc.conc}
			if tc.cancelNow {
				cfg.ShutdownTimeout = -1
			}
			c := &claimer{cfg: cfg,
				claimRTT: tc.rtt, rttKnown: tc.rttKnown, handlerDur: tc.dur, durKnown: tc.durKnown, payloadLen: tc.payload}
			if got := c.ahead(); got != tc.wantAhead {
				t.Errorf("ahead() = %d, want %d", got, tc.wantAhead)
			}
			if got := c.ahead(); got > claimAheadCap(tc.conc) {
				t.Errorf("ahead() = %d above the cap %d", got, claimAheadCap(tc.conc))
			}
		})
	}
}

// TestHandlerAverage: the claimer's moving average of handler durations
// (which sizes the buffer ahead) takes the durations of handlers that ran
// and ignores attempts the executors did not start (notStarted), which
// would pull it towards 0 and let a worker of long handlers claim ahead.
func TestHandlerAverage(t *testing.T) {
	ms := time.Millisecond
	cases := []struct {
		name      string
		returned  []time.Duration
		wantDur   time.Duration
		wantKnown bool
	}{
		{"none yet", nil, 0, false},
		{"only unstarted attempts", []time.Duration{notStarted, notStarted}, 0, false},
		{"first handler sets it", []time.Duration{40 * ms}, 40 * ms, true},
		{"moves an eighth of the way", []time.Duration{40 * ms, 48 * ms}, 41 * ms, true},
		{"unstarted attempts leave it", []time.Duration{30 * ms, notStarted, notStarted, notStarted, notStarted}, 30 * ms, true},
		{"long handlers stay past the bound", append([]time.Duration{30 * ms}, repeat(notStarted, 50)...), 30 * ms, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := &claimer{cfg: WorkerConfig{Concurrency: 8}, claimRTT: 2 * ms, rttKnown: true}
			for _, d := range tc.returned {
				c.handlerReturned(d)
			}
			if c.handlerDur != tc.wantDur || c.durKnown != tc.wantKnown {
				t.Errorf("average %v (known %v), want %v (known %v)", c.handlerDur, c.durKnown, tc.wantDur, tc.wantKnown)
			}
			if tc.wantDur >= claimAheadMaxHandler && c.ahead() != 0 {
				t.Errorf("ahead() = %d for handlers of %v, want 0", c.ahead(), c.handlerDur)
			}
		})
	}
}

// TestPayloadAverage: the claimer's average payload length, which bounds
// the bytes claimed ahead, starts at the first job's and moves a 64th of
// the way per job.
func TestPayloadAverage(t *testing.T) {
	cases := []struct {
		name    string
		lengths []int
		want    int
	}{
		{"none yet", nil, 0},
		{"first sets it", []int{1000}, 1000},
		{"an empty payload counts as 1", []int{0}, 1},
		{"moves a 64th of the way", []int{1000, 1640}, 1010},
		{"large payloads pull it up", append([]int{10}, repeatInt(1<<20, 200)...), 1 << 20 * 95 / 100},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := &claimer{}
			for _, n := range tc.lengths {
				c.payloadClaimed(n)
			}
			if tc.name == "large payloads pull it up" {
				if c.payloadLen < tc.want || c.payloadLen > 1<<20 {
					t.Errorf("average %d after 200 payloads of 1 MB, want between %d and %d", c.payloadLen, tc.want, 1<<20)
				}
				return
			}
			if c.payloadLen != tc.want {
				t.Errorf("average %d, want %d", c.payloadLen, tc.want)
			}
		})
	}
}

// repeatInt is n copies of v.
func repeatInt(v, n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = v
	}
	return out
}

// repeat is n copies of d.
func repeat(d time.Duration, n int) []time.Duration {
	out := make([]time.Duration, n)
	for i := range out {
		out[i] = d
	}
	return out
}

// TestExecutorSkipsAttemptCancelledBeforeStart: a claimed attempt that
// waited in the buffer while its context was cancelled is not started: one
// that lost its job is told lost, one the shutdown cut off is released.
// One whose lease could not be renewed is given back, which needs a
// database: TestBufferedAttemptLeaseLostNotCharged.
func TestExecutorSkipsAttemptCancelledBeforeStart(t *testing.T) {
	cases := []struct {
		name         string
		cause        error
		wantReleased bool
	}{
		{"lost its job", errLostJob, false},
		{"shutdown", errShutdown, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ran := false
			ex := &executors{
				q:        &Queue{}, // no listener: nothing to tell of the lost attempt
				log:      testdb.QuietLogger(),
				handlers: map[string]handlerFunc{"seq": func(context.Context, *JobRow) error { ran = true; return nil }},
				attempts: newInflightSet(),
				released: &releaseList{},
			}
			ctx, cancel := context.WithCancelCause(context.Background())
			row := &JobRow{ID: 7, Name: "seq", ClaimToken: "t-7"}
			a := &attempt{row: row, ref: row.ref(), ctx: ctx, cancel: cancel}
			ex.attempts.add(a)
			cancel(tc.cause)
			if d := ex.execute(a); d != notStarted {
				t.Errorf("execute returned duration %v for an attempt it did not start, want notStarted", d)
			}
			if ran {
				t.Error("the handler ran although the attempt was cancelled before it started")
			}
			if n := ex.attempts.len(); n != 0 {
				t.Errorf("%d attempts left in flight, want 0", n)
			}
			released := ex.released.take()
			if got := len(released) == 1 && released[0].row == row; got != tc.wantReleased {
				t.Errorf("released %v, want released: %v", released, tc.wantReleased)
			}
			if !errors.Is(context.Cause(ctx), tc.cause) {
				t.Errorf("cause %v, want %v", context.Cause(ctx), tc.cause)
			}
		})
	}
}

// TestWorkerClaimsAheadWithinBound: with short handlers the worker claims
// the next batch while the current one runs (more jobs claimed and not yet
// finished than it has slots), never more than Concurrency +
// claimAheadCap, and every job runs exactly once.
func TestWorkerClaimsAheadWithinBound(t *testing.T) {
	forEachEngine(t, func(t *testing.T, kind engine.Kind) {
		env := newTestEnv(t, kind)
		const jobs, conc = 1500, 2
		var claimed, returned, most atomic.Int64
		logs := &testdb.LogRecorder{}
		t.Cleanup(func() {
			if l := logs.Lines(slog.LevelWarn); len(l) != 0 {
				t.Errorf("the queue logged %d warnings or errors, want none: %q", len(l), l)
			}
			if t.Failed() {
				t.Logf("%d jobs claimed, %d handlers returned", claimed.Load(), returned.Load())
			}
		})
		q := env.queue(t, nil, WithLogger(slog.New(logs)), WithListener(func(ev Event) {
			if ev.Kind != EventClaimed {
				return
			}
			out := claimed.Add(1) - returned.Load()
			for {
				m := most.Load()
				if out <= m || most.CompareAndSwap(m, out) {
					break
				}
			}
		}))
		enqueueSeq(t, q, jobs)
		cfg := fastConfig()
		cfg.Concurrency = conc
		// Polls as a worker does: a job the claims passed over is claimed
		// at the next poll. On MariaDB a completion's (or heartbeat's) UPDATE of 256 ids on
		// this small table reads all of PRIMARY (EXPLAIN: index, not
		// range), locking each row a moment, so a claim beside it may skip
		// a pending job (SKIP LOCKED) and leave it behind the watermark
		// (claim_cursor.go); with a poll of an hour the drain then never
		// ended (1 of 40 runs under load). The bound holds whatever wakes
		// the claimer: held never exceeds Concurrency + ahead().
		cfg.PollInterval = 50 * time.Millisecond
		cfg.MaintenanceInterval = -1
		w := q.NewWorker(cfg)
		var mu sync.Mutex
		runs := map[int]int{}
		Handle(w, func(ctx context.Context, job *Job[seqArgs]) error {
			mu.Lock()
			runs[job.Args.N]++
			mu.Unlock()
			returned.Add(1)
			return nil
		})
		startWorker(t, w)
		waitUntil(t, 60*time.Second, "every job to run", func() bool { return returned.Load() == jobs })
		mu.Lock()
		defer mu.Unlock()
		if len(runs) != jobs {
			t.Errorf("%d distinct jobs ran, want %d", len(runs), jobs)
		}
		for n, c := range runs {
			if c != 1 {
				t.Errorf("job %d ran %d times", n, c)
			}
		}
		m, bound := most.Load(), int64(conc+claimAheadCap(conc))
		t.Logf("%s: at most %d jobs claimed and not finished (slots %d, bound %d)", kind, m, conc, bound)
		if m > bound {
			t.Errorf("%d jobs claimed and not finished at once, above the bound %d", m, bound)
		}
		if m <= conc {
			t.Errorf("at most %d jobs claimed and not finished at once: the worker never claimed ahead of its %d slots", m, conc)
		}
	})
}
