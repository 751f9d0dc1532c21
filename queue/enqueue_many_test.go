package queue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/testdb"
)

func TestEnqueueManyFewStatements(t *testing.T) {
	forEachEngine(t, func(t *testing.T, kind engine.Kind) {
		ctx := context.Background()
		env := coreEnv(t, kind)
		var sc stmtCounter
		q, _ := coreQueue(t, env, withStatementHook(sc.observe))
		analyzed := 0
		for _, c := range []struct{ jobs, maxStatements int }{{5000, 1}, {12000, 3}} {
			t.Run(fmt.Sprintf("%d jobs", c.jobs), func(t *testing.T) {
				sc.reset()
				args := make([]JobArgs, c.jobs)
				for i := range args {
					args[i] = testArgs{N: i}
				}
				n, err := q.EnqueueMany(ctx, args, Type("bulk"))
				if err != nil || n != c.jobs {
					t.Fatalf("EnqueueMany(%d) = %d, %v", c.jobs, n, err)
				}
				analyzed += sc.countWith("ANALYZE")
				inserts, copies := sc.countWith("INSERT"), sc.countWith("COPY ")
				if kind == engine.Postgres {
					// PostgreSQL: one COPY (copy_postgres.go), whatever the size.
					if inserts != 0 || copies != 1 {
						t.Errorf("%d jobs took %d INSERT and %d COPY statements, want one COPY", c.jobs, inserts, copies)
					}
				} else if inserts > c.maxStatements || inserts == 0 || copies != 0 {
					t.Errorf("%d jobs took %d statements (and %d COPY), want at most %d", c.jobs, inserts, copies, c.maxStatements)
				}
				if other := sc.count() - inserts - copies - sc.countWith("ANALYZE"); other != 0 {
					t.Errorf("%d other statements: %q", other, sc.texts)
				}
			})
		}
		// PostgreSQL: the first large EnqueueMany gave the new table planner
		// statistics, once.
		if want := map[engine.Kind]int{engine.Postgres: 1}[kind]; analyzed != want {
			t.Errorf("ANALYZE ran %d times on %s, want %d", analyzed, kind, want)
		}
		if n := env.countWhere(t, "type = 'bulk' AND status = 'pending'"); n != 17000 {
			t.Fatalf("%d bulk rows, want 17000", n)
		}
		// Ids follow the order of the slice.
		jobs, err := q.List(ctx, ListFilter{Limit: 3})
		if err != nil {
			t.Fatal(err)
		}
		for i, j := range jobs {
			var a testArgs
			if err := json.Unmarshal(j.Payload, &a); err != nil {
				t.Fatalf("job %d: payload %s: %v", j.ID, j.Payload, err)
			}
			if a.N != 11999-i {
				t.Fatalf("newest job %d holds n=%d, want %d", j.ID, a.N, 11999-i)
			}
		}
	})
}

func TestEnqueueManyAllOrNothing(t *testing.T) {
	forEachEngine(t, func(t *testing.T, kind engine.Kind) {
		env := coreEnv(t, kind)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		// The second chunk's statement is sent with a cancelled context, so
		// it fails after the first chunk was written in the transaction. On
		// PostgreSQL the jobs go in one COPY, inside the transaction: it
		// is cancelled likewise.
		failAt := 2
		if kind == engine.Postgres {
			failAt = 1
		}
		sc := &stmtCounter{hook: func(n int) {
			if n == failAt {
				cancel()
			}
		}}
		q, _ := coreQueue(t, env, withStatementHook(sc.observe))
		args := make([]JobArgs, 12000)
		for i := range args {
			args[i] = testArgs{N: i}
		}
		if _, err := q.EnqueueMany(ctx, args); err == nil {
			t.Fatal("EnqueueMany with a failing second chunk: no error")
		}
		if sc.count() < failAt {
			t.Fatalf("only %d statements sent", sc.count())
		}
		if n := rowCount(t, env); n != 0 {
			t.Fatalf("%d rows written, want none", n)
		}
	})
}

// TestEnqueueManyStoresWhatEnqueueStores: EnqueueMany (on PostgreSQL a
// COPY) writes each job exactly as Enqueue writes it: kind, type, payload,
// policy, schedule and deadline to the microsecond, created_at; with the
// options given to the call, to the job (WithOptions), or through an
// enqueue middleware. On PostgreSQL the first is the streamed COPY
// (streamMany), the other two the COPY of checked jobs (copyOwn).
func TestEnqueueManyStoresWhatEnqueueStores(t *testing.T) {
	forEachEngine(t, func(t *testing.T, kind engine.Kind) {
		ctx := context.Background()
		env := coreEnv(t, kind)
		var sc stmtCounter
		q, clock := coreQueue(t, env, withStatementHook(sc.observe))
		passed := 0
		viaMW := env.queue(t, nil, withClock(clock.now), WithLogger(testdb.QuietLogger()), withStatementHook(sc.observe),
			WithEnqueueMiddleware(func(ctx context.Context, call *EnqueueCall, next EnqueueFunc) error {
				passed++
				return next(ctx, call)
			}))
		at := clock.now().Add(90*time.Minute + 123456*time.Microsecond)
		cases := []struct {
			name string
			args JobArgs
			opts []EnqueueOption
		}{
			{"defaults", testArgs{N: 1}, nil},
			{"unicode payload and a type", testArgs{N: 2, Text: "données 🚀 \"quoted\" \\ back"}, []EnqueueOption{Type("mail")}},
			{"scheduled and expiring", testArgs{N: 3}, []EnqueueOption{At(at), ExpiresAt(at.Add(time.Hour + 7*time.Microsecond))}},
			{"own policy", testArgs{N: 4}, []EnqueueOption{Policy(RetryPolicy{MaxAttempts: 9, BaseDelay: 7 * time.Second, MaxDelay: 70 * time.Second})}},
			{"raw args", RawArgs{Name: "raw", Payload: json.RawMessage(`{"nested":{"a":[1,2,3]},"b":null}`)}, nil},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				one, err := q.Enqueue(ctx, c.args, c.opts...)
				if err != nil {
					t.Fatalf("Enqueue: %v", err)
				}
				for _, way := range []struct {
					name string
					q    *Queue
					args []JobArgs
					opts []EnqueueOption
				}{
					{"call's options", q, []JobArgs{c.args}, c.opts},
					{"job's options", q, []JobArgs{WithOptions(c.args, c.opts...)}, nil},
					{"middleware", viaMW, []JobArgs{c.args}, c.opts},
				} {
					sc.reset()
					if n, err := way.q.EnqueueMany(ctx, way.args, way.opts...); err != nil || n != 1 {
						t.Fatalf("EnqueueMany with the %s = %d, %v", way.name, n, err)
					}
					if copies := sc.countWith("COPY "); kind == engine.Postgres && copies != 1 {
						t.Errorf("EnqueueMany with the %s sent %d COPY statements, want 1: %q", way.name, copies, sc.texts)
					}
					jobs, err := q.List(ctx, ListFilter{Limit: 1})
					if err != nil || len(jobs) != 1 {
						t.Fatalf("List: %v (%d jobs)", err, len(jobs))
					}
					want, got := getJob(t, q, one), jobs[0]
					if got.ID == want.ID {
						t.Fatalf("EnqueueMany's job has the id %d of Enqueue's", got.ID)
					}
					got.ID = want.ID
					var gp, wp any
					if err := json.Unmarshal(got.Payload, &gp); err != nil {
						t.Fatalf("payload %s: %v", got.Payload, err)
					}
					if err := json.Unmarshal(want.Payload, &wp); err != nil {
						t.Fatalf("payload %s: %v", want.Payload, err)
					}
					if diff := cmp.Diff(wp, gp); diff != "" {
						t.Errorf("%s: payload %s, want %s (-want +got):\n%s", way.name, got.Payload, want.Payload, diff)
					}
					got.Payload, want.Payload = nil, nil
					if g, w := fmt.Sprintf("%+v", jobView(got)), fmt.Sprintf("%+v", jobView(want)); g != w {
						t.Errorf("EnqueueMany with the %s wrote\n%s\nEnqueue wrote\n%s", way.name, g, w)
					}
				}
			})
		}
		if passed != len(cases) {
			t.Errorf("the middleware saw %d calls, want %d", passed, len(cases))
		}
	})
}

// jobView is a job with its pointers followed, for printing.
func jobView(j *JobRow) map[string]any {
	deref := func(t *time.Time) any {
		if t == nil {
			return nil
		}
		return t.UTC().Format(time.RFC3339Nano)
	}
	return map[string]any{
		"id": j.ID, "name": j.Name, "type": j.Type, "status": j.Status, "attempts": j.Attempts,
		"token": j.ClaimToken, "lease": deref(j.LeaseUntil), "max_attempts": j.MaxAttempts,
		"base_delay": j.BaseDelay, "max_delay": j.MaxDelay, "error": j.Error,
		"scheduled_at": j.ScheduledAt.UTC().Format(time.RFC3339Nano), "expires_at": deref(j.ExpiresAt),
		"finished_at": deref(j.FinishedAt), "created_at": j.CreatedAt.UTC().Format(time.RFC3339Nano),
	}
}

// TestEnqueueManyPooledNoCopy: behind a transaction pooler EnqueueMany on
// PostgreSQL keeps the multi-row INSERT (pgx's COPY may leave a prepared
// statement in the session); without one it uses COPY.
func TestEnqueueManyPooledNoCopy(t *testing.T) {
	env := coreEnv(t, engine.Postgres)
	for _, c := range []struct {
		name                 string
		pooled               bool
		wantInsert, wantCopy int
	}{
		{"pooled", true, 1, 0},
		{"direct", false, 0, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			var sc stmtCounter
			q, _ := coreQueue(t, env, withStatementHook(sc.observe), WithTransactionPooling(c.pooled))
			if n, err := q.EnqueueMany(context.Background(), []JobArgs{testArgs{N: 1}, testArgs{N: 2}}); err != nil || n != 2 {
				t.Fatalf("EnqueueMany = %d, %v", n, err)
			}
			if ins, cp := sc.countWith("INSERT"), sc.countWith("COPY "); ins != c.wantInsert || cp != c.wantCopy {
				t.Errorf("%d INSERT and %d COPY statements, want %d and %d", ins, cp, c.wantInsert, c.wantCopy)
			}
		})
	}
}

// TestWithOptionsReplaceTheCalls: a job's own options (WithOptions) are
// applied after the call's, so its schedule replaces the call's schedule
// (a job's At overrides the call's Delay, where the call was refused as
// "both At and Delay") and its deadline the call's deadline; a job without
// one keeps the call's, and two of a kind in one list are still refused.
func TestWithOptionsReplaceTheCalls(t *testing.T) {
	forEachEngine(t, func(t *testing.T, kind engine.Kind) {
		ctx := context.Background()
		env := coreEnv(t, kind)
		q, clock := coreQueue(t, env)
		now := clock.now()
		hour := func(h int) time.Time { return now.Add(time.Duration(h) * time.Hour) }
		cases := []struct {
			name              string
			call, own         []EnqueueOption
			wantAt, wantUntil time.Time // wantUntil zero: no deadline
			wantErr           bool
		}{
			{name: "own At over the call's Delay", call: []EnqueueOption{Delay(time.Hour)}, own: []EnqueueOption{At(hour(3))}, wantAt: hour(3)},
			{name: "own Delay over the call's At", call: []EnqueueOption{At(hour(5))}, own: []EnqueueOption{Delay(2 * time.Hour)}, wantAt: hour(2)},
			{name: "the call's Delay kept", call: []EnqueueOption{Delay(time.Hour)}, own: []EnqueueOption{Type("own")}, wantAt: hour(1)},
			{name: "own ExpiresAt over the call's ExpiresIn", call: []EnqueueOption{ExpiresIn(time.Hour)}, own: []EnqueueOption{ExpiresAt(hour(4))}, wantAt: now, wantUntil: hour(4)},
			{name: "own ExpiresIn over the call's ExpiresAt", call: []EnqueueOption{ExpiresAt(hour(4))}, own: []EnqueueOption{ExpiresIn(2 * time.Hour)}, wantAt: now, wantUntil: hour(2)},
			{name: "the call's deadline kept, own schedule", call: []EnqueueOption{ExpiresIn(6 * time.Hour)}, own: []EnqueueOption{Delay(time.Hour)}, wantAt: hour(1), wantUntil: hour(6)},
			{name: "own At and Delay", own: []EnqueueOption{At(hour(1)), Delay(time.Hour)}, wantErr: true},
			{name: "the call's At and Delay", call: []EnqueueOption{At(hour(1)), Delay(time.Hour)}, own: []EnqueueOption{Delay(time.Hour)}, wantErr: true},
			{name: "own schedule after the call's deadline", call: []EnqueueOption{ExpiresIn(time.Hour)}, own: []EnqueueOption{Delay(2 * time.Hour)}, wantErr: true},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				env.emptyTable(t)
				n, err := q.EnqueueMany(ctx, []JobArgs{WithOptions(testArgs{N: 1}, c.own...)}, c.call...)
				if c.wantErr {
					if !errors.Is(err, ErrInvalidJob) || n != 0 {
						t.Fatalf("EnqueueMany = %d, %v; want ErrInvalidJob", n, err)
					}
					return
				}
				if err != nil || n != 1 {
					t.Fatalf("EnqueueMany = %d, %v; want 1 job", n, err)
				}
				jobs, err := q.List(ctx, ListFilter{Limit: 1})
				if err != nil || len(jobs) != 1 {
					t.Fatalf("List = %v, %v", jobs, err)
				}
				j := jobs[0]
				if !j.ScheduledAt.Equal(c.wantAt.Truncate(time.Second)) && !j.ScheduledAt.Equal(c.wantAt) {
					t.Errorf("scheduled at %v, want %v", j.ScheduledAt, c.wantAt)
				}
				switch {
				case c.wantUntil.IsZero() && j.ExpiresAt != nil:
					t.Errorf("expires at %v, want no deadline", *j.ExpiresAt)
				case !c.wantUntil.IsZero() && (j.ExpiresAt == nil || !j.ExpiresAt.Truncate(time.Second).Equal(c.wantUntil.Truncate(time.Second))):
					t.Errorf("expires at %v, want %v", j.ExpiresAt, c.wantUntil)
				}
			})
		}
	})
}

// TestEnqueueManyTxAllOrNothing: EnqueueManyTx whose later statement the
// server refuses (a payload it does not take, or on SQLite a trigger's
// refusal, in the last chunk of a large call) leaves none of its jobs in
// the caller's transaction, which stays usable: the caller's own work
// before it commits alone. On MySQL the first chunk's 7281 jobs stayed
// and were committed with the caller's work (on SQLite the first chunks'
// likewise); on PostgreSQL the transaction was aborted, the caller's work
// with it.
func TestEnqueueManyTxAllOrNothing(t *testing.T) {
	forEachEngine(t, func(t *testing.T, kind engine.Kind) {
		ctx := context.Background()
		env := coreEnv(t, kind)
		q, _ := coreQueue(t, env)
		var refused string
		switch kind {
		case engine.MySQL:
			refused = strings.Repeat("[", 40) + strings.Repeat("]", 40) // MariaDB takes 31 levels, MySQL 100
		case engine.Postgres:
			refused = `{"a":"\ud800"}` // valid JSON to Go, a lone surrogate to JSONB
		default:
			// SQLite stores any JSON text: a trigger of the application's
			// refuses the row instead.
			refused = `{}`
			env.exec(t, "CREATE TRIGGER refuse_the_refused BEFORE INSERT ON {t} WHEN NEW.name = 'refused' BEGIN SELECT RAISE(ABORT, 'refused by a trigger'); END")
		}
		args := make([]JobArgs, 8000) // two chunks of multi-row statements
		for i := range args {
			args[i] = testArgs{N: i}
		}
		args = append(args, RawArgs{Name: "refused", Payload: json.RawMessage(refused)})
		tx, err := env.db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback()
		own, err := q.EnqueueTx(ctx, tx, testArgs{N: -1}) // the caller's own work
		if err != nil {
			t.Fatal(err)
		}
		if n, err := q.EnqueueManyTx(ctx, tx, args); err == nil || n != 0 {
			t.Fatalf("EnqueueManyTx = %d, %v; want the last job refused", n, err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatalf("commit after the refused EnqueueManyTx: %v", err)
		}
		if got := rowCount(t, env); got != 1 {
			t.Fatalf("%d rows after the commit; want only the caller's own job %d", got, own)
		}
		if j := getJob(t, q, own); j.Status != StatusPending {
			t.Fatalf("the caller's own job: %v", j.Status)
		}
	})
}

// TestWithOptionsNested: a job wrapped in WithOptions twice keeps its
// payload and every option of both wrappers, the outer one's last, in
// Enqueue and EnqueueMany alike. The inner wrapper used to go to the codec
// as the args: the job was written with the payload {} and without the
// inner options, and the caller was told nothing.
func TestWithOptionsNested(t *testing.T) {
	forEachEngine(t, func(t *testing.T, kind engine.Kind) {
		ctx := context.Background()
		env := coreEnv(t, kind)
		q, _ := coreQueue(t, env)
		nested := WithOptions(WithOptions(testArgs{N: 7}, Type("inner"), Delay(time.Hour)), Type("outer"))
		cases := []struct {
			name    string
			enqueue func() error
		}{
			{name: "Enqueue", enqueue: func() error {
				_, err := q.Enqueue(ctx, nested)
				return err
			}},
			{name: "EnqueueMany", enqueue: func() error {
				n, err := q.EnqueueMany(ctx, []JobArgs{nested, testArgs{N: 8}})
				if err == nil && n != 2 {
					return fmt.Errorf("wrote %d jobs, want 2", n)
				}
				return err
			}},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				env.emptyTable(t)
				if err := c.enqueue(); err != nil {
					t.Fatal(err)
				}
				jobs, err := q.List(ctx, ListFilter{Type: "outer"})
				if err != nil {
					t.Fatal(err)
				}
				if len(jobs) != 1 {
					t.Fatalf("%d jobs of type outer, want 1", len(jobs))
				}
				j := jobs[0]
				var got testArgs
				if err := json.Unmarshal(j.Payload, &got); err != nil || got.N != 7 {
					t.Errorf("payload %s (%v), want N 7", j.Payload, err)
				}
				if !j.ScheduledAt.After(j.CreatedAt.Add(59 * time.Minute)) {
					t.Errorf("scheduled at %v, created at %v: the inner Delay was lost", j.ScheduledAt, j.CreatedAt)
				}
			})
		}
	})
}
