package queue

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/jobqueue/jobqueue/internal/engine"
)

func TestEnqueueStoresTheJob(t *testing.T) {
	forEachEngine(t, func(t *testing.T, kind engine.Kind) {
		env := coreEnv(t, kind)
		q, clock := coreQueue(t, env, WithRetryPolicy(RetryPolicy{MaxAttempts: 5, BaseDelay: 2 * time.Second, MaxDelay: 30 * time.Second}))
		now := clock.now()
		at := now.Add(time.Hour)
		deadline := now.Add(2 * time.Hour)
		own := RetryPolicy{MaxAttempts: 7, BaseDelay: 3 * time.Second, MaxDelay: 9 * time.Second}
		cases := []struct {
			name    string
			args    JobArgs
			opts    []EnqueueOption
			kind    string
			typ     string
			sched   time.Time
			expires *time.Time
			pol     RetryPolicy
			payload string
		}{
			{name: "defaults", args: testArgs{N: 1}, kind: "test", typ: "default", sched: now, pol: RetryPolicy{MaxAttempts: 5, BaseDelay: 2 * time.Second, MaxDelay: 30 * time.Second}, payload: `{"n":1}`},
			{name: "type at expires policy", args: testArgs{N: 2, Text: "héllo ✓"}, opts: []EnqueueOption{Type("email"), At(at.In(time.FixedZone("X", 5*3600))), ExpiresAt(deadline), Policy(own)},
				kind: "test", typ: "email", sched: at, expires: &deadline, pol: own, payload: `{"n":2,"text":"héllo ✓"}`},
			{name: "delay expires-in", args: kindArgs{K: "k"}, opts: []EnqueueOption{Delay(time.Minute), ExpiresIn(time.Hour)},
				kind: "k", typ: "default", sched: now.Add(time.Minute), expires: ptr(now.Add(time.Hour)), pol: RetryPolicy{MaxAttempts: 5, BaseDelay: 2 * time.Second, MaxDelay: 30 * time.Second}, payload: `{"K":"k"}`},
			{name: "raw args", args: RawArgs{Name: "raw", Payload: json.RawMessage(`[1, 2]`)}, kind: "raw", typ: "default", sched: now, pol: RetryPolicy{MaxAttempts: 5, BaseDelay: 2 * time.Second, MaxDelay: 30 * time.Second}, payload: `[1,2]`},
			{name: "raw empty payload", args: RawArgs{Name: "raw"}, kind: "raw", typ: "default", sched: now, pol: RetryPolicy{MaxAttempts: 5, BaseDelay: 2 * time.Second, MaxDelay: 30 * time.Second}, payload: `{}`},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				id := mustEnqueue(t, q, c.args, c.opts...)
				j := getJob(t, q, id)
				if j.Name != c.kind || j.Type != c.typ || j.Status != StatusPending || j.Attempts != 0 || j.ClaimToken != "" ||
					j.LeaseUntil != nil || j.FinishedAt != nil || j.Error != "" {
					t.Errorf("%s: got %+v", c.name, j)
				}
				if !j.ScheduledAt.Equal(c.sched) || j.ScheduledAt.Location() != time.UTC || !j.CreatedAt.Equal(now) {
					t.Errorf("%s: scheduled_at %v created_at %v, want %v and %v (UTC)", c.name, j.ScheduledAt, j.CreatedAt, c.sched, now)
				}
				if (j.ExpiresAt == nil) != (c.expires == nil) || j.ExpiresAt != nil && !j.ExpiresAt.Equal(*c.expires) {
					t.Errorf("%s: expires_at %v, want %v", c.name, j.ExpiresAt, c.expires)
				}
				if j.MaxAttempts != c.pol.MaxAttempts || j.BaseDelay != c.pol.BaseDelay || j.MaxDelay != c.pol.MaxDelay {
					t.Errorf("%s: policy %d/%v/%v, want %+v", c.name, j.MaxAttempts, j.BaseDelay, j.MaxDelay, c.pol)
				}
				var got, want any
				if err := json.Unmarshal(j.Payload, &got); err != nil {
					t.Fatalf("%s: payload %s: %v", c.name, j.Payload, err)
				}
				if err := json.Unmarshal([]byte(c.payload), &want); err != nil {
					t.Fatalf("%s: the case's payload %s: %v", c.name, c.payload, err)
				}
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("%s: payload %s, want %s (-want +got):\n%s", c.name, j.Payload, c.payload, diff)
				}
			})
		}
	})
}

func ptr[T any](v T) *T { return &v }

func TestEnqueueRejectsBadInput(t *testing.T) {
	forEachEngine(t, func(t *testing.T, kind engine.Kind) {
		ctx := context.Background()
		env := coreEnv(t, kind)
		q, clock := coreQueue(t, env)
		now := clock.now()
		cases := []struct {
			name string
			args JobArgs
			opts []EnqueueOption
			want error
			only engine.Kind // the case applies to this engine only
		}{
			{name: "args that do not encode", args: badArgs{C: make(chan int)}, want: ErrPayloadRejected},
			{name: "raw payload not UTF-8", args: RawArgs{Name: "raw", Payload: json.RawMessage("{\"a\":\"\xff\"}")}, want: ErrPayloadRejected},
			{name: "raw payload not JSON", args: RawArgs{Name: "raw", Payload: json.RawMessage(`{nope`)}, want: ErrPayloadRejected},
			{name: "empty kind", args: kindArgs{K: ""}, want: ErrInvalidJob},
			{name: "kind of 256 characters", args: kindArgs{K: strings.Repeat("k", 256)}, want: ErrInvalidJob},
			{name: "nil args", args: nil, want: ErrInvalidJob},
			{name: "type of 65 characters", args: testArgs{}, opts: []EnqueueOption{Type(strings.Repeat("t", 65))}, want: ErrInvalidJob},
			{name: "empty type", args: testArgs{}, opts: []EnqueueOption{Type("")}, want: ErrInvalidJob},
			{name: "zero attempts", args: testArgs{}, opts: []EnqueueOption{Policy(RetryPolicy{MaxAttempts: 0, BaseDelay: time.Second, MaxDelay: time.Second})}, want: ErrInvalidPolicy},
			{name: "negative delay", args: testArgs{}, opts: []EnqueueOption{Policy(RetryPolicy{MaxAttempts: 1, BaseDelay: -time.Second, MaxDelay: time.Second})}, want: ErrInvalidPolicy},
			{name: "zero max delay", args: testArgs{}, opts: []EnqueueOption{Policy(RetryPolicy{MaxAttempts: 1, BaseDelay: time.Second})}, want: ErrInvalidPolicy},
			{name: "deadline before schedule", args: testArgs{}, opts: []EnqueueOption{At(now.Add(time.Hour)), ExpiresAt(now.Add(time.Minute))}, want: ErrInvalidJob},
			{name: "negative expires-in", args: testArgs{}, opts: []EnqueueOption{ExpiresIn(-time.Minute)}, want: ErrInvalidJob},
			{name: "at and delay", args: testArgs{}, opts: []EnqueueOption{At(now), Delay(time.Second)}, want: ErrInvalidJob},
			{name: "NUL in payload", args: testArgs{Text: "a\x00b"}, want: ErrPayloadRejected, only: engine.Postgres},
			// PostgreSQL cannot store a NUL nor text that is not UTF-8, and
			// a job must not be written on two engines and refused on the
			// third: every engine refuses them before writing (textProblem).
			{name: "NUL in kind", args: kindArgs{K: "a\x00b"}, want: ErrInvalidJob},
			{name: "kind not UTF-8", args: kindArgs{K: "a\xffb"}, want: ErrInvalidJob},
			{name: "NUL in type", args: testArgs{}, opts: []EnqueueOption{Type("a\x00b")}, want: ErrInvalidJob},
			{name: "type not UTF-8", args: testArgs{}, opts: []EnqueueOption{Type("a\xffb")}, want: ErrInvalidJob},
			{name: "NUL in unique key", args: testArgs{}, opts: []EnqueueOption{UniqueKey("a\x00b")}, want: ErrInvalidJob},
			{name: "unique key not UTF-8", args: testArgs{}, opts: []EnqueueOption{UniqueKey("a\xffb")}, want: ErrInvalidJob},
			// MySQL compares "report " equal to "report" (PAD SPACE), the
			// other engines do not.
			{name: "kind ending in a space", args: kindArgs{K: "report "}, want: ErrInvalidJob},
			{name: "type ending in a space", args: testArgs{}, opts: []EnqueueOption{Type("report ")}, want: ErrInvalidJob},
			{name: "unique key ending in a space", args: testArgs{}, opts: []EnqueueOption{UniqueKey("report ")}, want: ErrInvalidJob},
			// The INT column holds at most 2^31-1 seconds: PostgreSQL stored a
			// negative base_delay (int32 wrap), MySQL a wrapped one.
			{name: "base delay beyond the INT column", args: testArgs{}, opts: []EnqueueOption{Policy(RetryPolicy{MaxAttempts: 1, BaseDelay: (math.MaxInt32 + 1) * time.Second, MaxDelay: time.Hour})}, want: ErrInvalidPolicy},
			// Years past 9999: MySQL refused them with a server error, SQLite
			// compared the 5-digit year as text and claimed the job at once.
			{name: "schedule after year 9999", args: testArgs{}, opts: []EnqueueOption{At(time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC))}, want: ErrInvalidJob},
			{name: "deadline after year 9999", args: testArgs{}, opts: []EnqueueOption{ExpiresAt(time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC))}, want: ErrInvalidJob},
			{name: "schedule before year 1", args: testArgs{}, opts: []EnqueueOption{At(time.Date(0, 12, 31, 0, 0, 0, 0, time.UTC))}, want: ErrInvalidJob},
			// A typed nil pointer panicked in Kind().
			{name: "nil pointer args", args: (*testArgs)(nil), want: ErrInvalidJob},
		}
		for _, c := range cases {
			if c.only != "" && c.only != kind {
				continue // a case of another engine
			}
			t.Run(c.name, func(t *testing.T) {
				for _, many := range []bool{false, true} {
					var err error
					if many {
						var n int
						n, err = q.EnqueueMany(ctx, []JobArgs{testArgs{N: 1}, testArgs{N: 2}, c.args}, c.opts...)
						if n != 0 {
							t.Errorf("%s: EnqueueMany wrote %d", c.name, n)
						}
					} else {
						_, err = q.Enqueue(ctx, c.args, c.opts...)
					}
					if !errors.Is(err, c.want) {
						t.Errorf("%s (many=%v): error %v, want %v", c.name, many, err, c.want)
					}
					// A per-job error of EnqueueMany names the job's index.
					if many && err != nil && c.want != ErrInvalidPolicy && !strings.Contains(err.Error(), "job 2 of 3") && !isOptionError(c.name) {
						t.Errorf("%s: EnqueueMany error %q does not name job 2", c.name, err)
					}
				}
				if n := rowCount(t, env); n != 0 {
					t.Fatalf("%s: %d rows written", c.name, n)
				}
			})
		}
		// Text that merely looks like the escape is fine everywhere.
		if _, err := q.Enqueue(ctx, testArgs{Text: `\u0000`}); err != nil {
			t.Errorf("a payload with the text \\u0000 (escaped backslash): %v", err)
		}
	})
}

// isOptionError reports the cases whose error comes from the options, which
// apply to every job, so EnqueueMany names no index.
func isOptionError(name string) bool {
	switch name {
	case "type of 65 characters", "empty type", "deadline before schedule", "negative expires-in", "at and delay",
		"schedule after year 9999", "deadline after year 9999", "schedule before year 1",
		"NUL in type", "type not UTF-8", "NUL in unique key", "unique key not UTF-8",
		"type ending in a space", "unique key ending in a space":
		return true
	}
	return false
}

func TestEnqueueTx(t *testing.T) {
	forEachEngine(t, func(t *testing.T, kind engine.Kind) {
		ctx := context.Background()
		env := coreEnv(t, kind)
		q, _ := coreQueue(t, env)
		for _, commit := range []bool{false, true} {
			tx, err := env.db.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			id, err := q.EnqueueTx(ctx, tx, testArgs{N: 1})
			if err != nil || id <= 0 {
				t.Fatalf("EnqueueTx = %d, %v", id, err)
			}
			n, err := q.EnqueueManyTx(ctx, tx, []JobArgs{testArgs{N: 2}, testArgs{N: 3}})
			if err != nil || n != 2 {
				t.Fatalf("EnqueueManyTx = %d, %v", n, err)
			}
			if commit {
				err = tx.Commit()
			} else {
				err = tx.Rollback()
			}
			if err != nil {
				t.Fatal(err)
			}
			want := 0
			if commit {
				want = 3
			}
			if n := rowCount(t, env); n != want {
				t.Fatalf("commit=%v: %d rows, want %d", commit, n, want)
			}
			_, err = q.Get(ctx, id)
			if commit != (err == nil) || !commit && !errors.Is(err, ErrJobNotFound) {
				t.Fatalf("commit=%v: Get(%d) = %v", commit, id, err)
			}
		}
		if _, err := q.EnqueueTx(ctx, nil, testArgs{}); err == nil {
			t.Error("EnqueueTx with a nil tx: no error")
		}
		// A transaction of another pool on the same database works too.
		if kind != engine.SQLite {
			other := env.newPool(t)
			tx, err := other.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			id, err := q.EnqueueTx(ctx, tx, testArgs{N: 4})
			if err != nil {
				t.Fatalf("EnqueueTx on another pool's tx: %v", err)
			}
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
			getJob(t, q, id)
		}
	})
}

func TestEnqueueWakesWorkers(t *testing.T) {
	env := coreEnv(t, engine.SQLite)
	q, _ := coreQueue(t, env)
	ctx := context.Background()
	for _, c := range []struct {
		name string
		do   func() error
	}{
		{"Enqueue", func() error { _, err := q.Enqueue(ctx, testArgs{}); return err }},
		{"EnqueueMany", func() error { _, err := q.EnqueueMany(ctx, []JobArgs{testArgs{}}); return err }},
	} {
		t.Run(c.name, func(t *testing.T) {
			woken := q.wake.wait()
			if err := c.do(); err != nil {
				t.Fatal(err)
			}
			select {
			case <-woken:
			default:
				t.Errorf("%s did not wake idle workers", c.name)
			}
		})
	}
	woken := q.wake.wait()
	if _, err := q.Enqueue(ctx, kindArgs{}); err == nil {
		t.Fatal("Enqueue of an empty kind: no error")
	}
	select {
	case <-woken:
		t.Error("a rejected Enqueue woke workers")
	default:
	}
}

// TestSingleEnqueuesAnalyzeOnce: a new table filled by single Enqueues gets
// planner statistics on PostgreSQL like one filled by EnqueueMany: once the
// queue has enqueued analyzeAfter jobs, and only once.
func TestSingleEnqueuesAnalyzeOnce(t *testing.T) {
	forEachEngine(t, func(t *testing.T, kind engine.Kind) {
		ctx := context.Background()
		env := coreEnv(t, kind)
		var sc stmtCounter
		q, _ := coreQueue(t, env, withStatementHook(sc.observe))
		want := map[engine.Kind]int{engine.Postgres: 1}[kind]
		for i := range analyzeAfter + 10 {
			if _, err := q.Enqueue(ctx, testArgs{N: i}); err != nil {
				t.Fatalf("Enqueue %d: %v", i, err)
			}
			got := sc.countWith("ANALYZE")
			switch {
			case i < analyzeAfter-1 && got != 0:
				t.Fatalf("ANALYZE ran after %d enqueues, before %d", i+1, analyzeAfter)
			case i >= analyzeAfter-1 && got != want:
				t.Fatalf("ANALYZE ran %d times after %d enqueues on %s, want %d", got, i+1, kind, want)
			}
		}
	})
}
