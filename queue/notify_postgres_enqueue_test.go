package queue

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/testdb"
)

// TestEnqueueNotifications reads the notifications themselves on a session
// that listens on the table's channel: one per committed enqueue call,
// with the type as payload, none for a rollback, one per transaction for
// identical ones, none on another table's channel, and fewer than one per
// job for a burst of Enqueues.
func TestEnqueueNotifications(t *testing.T) {
	t.Parallel()
	env := newTestEnv(t, engine.Postgres)
	q := env.queue(t, nil, WithLogger(testdb.QuietLogger()))
	other := newTestEnv(t, engine.Postgres)
	oq := other.queue(t, other.db, WithLogger(testdb.QuietLogger()))
	ctx := context.Background()

	conn, err := env.newPool(t).Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, `LISTEN `+env.tbl.Quoted()); err != nil {
		t.Fatal(err)
	}
	// next returns the notifications that arrive within 2s or until n
	// arrived, and then within 300ms more (extra ones).
	next := func(t *testing.T, n int) []string {
		t.Helper()
		var got []string
		deadline := time.Now().Add(2 * time.Second)
		extra := false
		err := conn.Raw(func(dc any) error {
			pc := dc.(*stdlib.Conn).Conn()
			for {
				if len(got) >= n && !extra {
					extra, deadline = true, time.Now().Add(300*time.Millisecond)
				}
				wctx, cancel := context.WithDeadline(ctx, deadline)
				note, err := pc.WaitForNotification(wctx)
				cancel()
				if err != nil {
					if pgconn.Timeout(err) || errors.Is(err, context.DeadlineExceeded) {
						return nil
					}
					return err
				}
				got = append(got, note.Channel+":"+note.Payload)
			}
		})
		if err != nil {
			t.Fatalf("waiting for notifications: %v", err)
		}
		return got
	}
	many := func(n int) []JobArgs {
		args := make([]JobArgs, n)
		for i := range args {
			args[i] = testArgs{N: i}
		}
		return args
	}
	inTx := func(commit bool, fn func(tx *sql.Tx) error) error {
		tx, err := env.db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		if err := fn(tx); err != nil {
			tx.Rollback()
			return err
		}
		if commit {
			return tx.Commit()
		}
		return tx.Rollback()
	}
	ch := env.tbl.Name
	for _, c := range []struct {
		name string
		do   func() error
		want []string
	}{
		{"Enqueue", func() error { _, err := q.Enqueue(ctx, testArgs{}, Type("a")); return err }, []string{ch + ":a"}},
		{"Enqueue default type", func() error { _, err := q.Enqueue(ctx, testArgs{}); return err }, []string{ch + ":default"}},
		{"EnqueueMany in two chunks", func() error { _, err := q.EnqueueMany(ctx, many(maxChunkJobs+10), Type("b")); return err }, []string{ch + ":b"}},
		{"EnqueueTx rolled back", func() error {
			return inTx(false, func(tx *sql.Tx) error { _, err := q.EnqueueTx(ctx, tx, testArgs{}, Type("c")); return err })
		}, nil},
		{"two EnqueueTx and an EnqueueManyTx in one transaction", func() error {
			return inTx(true, func(tx *sql.Tx) error {
				for _, typ := range []string{"d", "d"} {
					if _, err := q.EnqueueTx(ctx, tx, testArgs{}, Type(typ)); err != nil {
						return err
					}
				}
				_, err := q.EnqueueManyTx(ctx, tx, many(2), Type("e"))
				return err
			})
		}, []string{ch + ":d", ch + ":e"}},
		{"bad input", func() error {
			if _, err := q.Enqueue(ctx, testArgs{}, Type("")); !errors.Is(err, ErrInvalidJob) {
				return fmt.Errorf("Enqueue with an empty type: %v, want ErrInvalidJob", err)
			}
			return nil
		}, nil},
		{"another table", func() error { _, err := oq.Enqueue(ctx, testArgs{}, Type("a")); return err }, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			if err := c.do(); err != nil {
				t.Fatal(err)
			}
			got := next(t, len(c.want))
			if fmt.Sprint(got) != fmt.Sprint(c.want) {
				t.Errorf("notifications %q, want %q", got, c.want)
			}
		})
	}

	// A burst of Enqueues: the queue sends one notification at a time, so
	// the burst costs fewer than one per job, and at least one.
	const burst = 50
	var wg sync.WaitGroup
	for range burst {
		wg.Go(func() {
			if _, err := q.Enqueue(ctx, testArgs{}, Type("f")); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	got := next(t, 1)
	if len(got) == 0 || len(got) >= burst {
		t.Errorf("%d concurrent Enqueues sent %d notifications, want at least 1 and fewer than %d", burst, len(got), burst)
	}
	for _, g := range got {
		if g != ch+":f" {
			t.Errorf("burst: notification %q, want %q", g, ch+":f")
		}
	}
	t.Logf("%d concurrent Enqueues: %d notifications", burst, len(got))
}

func TestListenerWants(t *testing.T) {
	all := &pgListener{}
	some := &pgListener{types: map[string]bool{"a": true, "b": true}}
	for _, c := range []struct {
		name    string
		l       *pgListener
		payload string
		want    bool
	}{
		{"every type, a", all, "a", true},
		{"every type, several types", all, "", true},
		{"a and b, a", some, "a", true},
		{"a and b, b", some, "b", true},
		{"a and b, c", some, "c", false},
		{"a and b, several types", some, "", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := c.l.wants(c.payload); got != c.want {
				t.Errorf("wants(%q) with types %v = %v, want %v", c.payload, c.l.types, got, c.want)
			}
		})
	}
}

// TestEnqueueNotifiesInInsert: the first Enqueue after a quiet spell
// notifies in its insert statement (InsertJobNotify: the NOTIFY rides its
// commit, no transaction of its own), and the Enqueues that follow within
// announceGap leave their notification to the notifier, so that a burst
// still costs fewer notifying commits than jobs.
func TestEnqueueNotifiesInInsert(t *testing.T) {
	t.Parallel()
	env := newTestEnv(t, engine.Postgres)
	inserts := newStatementNames("InsertJobNotify", "InsertJob", "InsertJobsJSONReturning")
	q := env.queue(t, nil, WithLogger(testdb.QuietLogger()), withStatementHook(inserts.hook))
	ctx := context.Background()
	quiet := func() { waitNotifierIdle(t, q) }
	// count returns how many of the inserts since the last count notified
	// themselves; there are burst of them, or, where the Enqueues of many
	// goroutines were combined (enqueue_combine.go), from burst/16 to burst.
	count := func(t *testing.T, burst int) int {
		t.Helper()
		got := inserts.take()
		n := 0
		for _, name := range got {
			if name == "InsertJobNotify" {
				n++
			}
		}
		if len(got) > burst || len(got) < burst/16 {
			t.Fatalf("inserts %q, want from %d to %d", got, burst/16, burst)
		}
		return n
	}
	for _, c := range []string{"one Enqueue after a quiet spell", "another after a quiet spell"} {
		t.Run(c, func(t *testing.T) {
			quiet()
			if _, err := q.Enqueue(ctx, testArgs{}, Type("a")); err != nil {
				t.Fatal(err)
			}
			if n := count(t, 1); n != 1 {
				t.Errorf("%d of 1 inserts notified themselves, want 1", n)
			}
		})
	}
	t.Run("a burst from 16 goroutines", func(t *testing.T) {
		const burst = 32
		quiet()
		var wg sync.WaitGroup
		for range 16 {
			wg.Go(func() {
				for range burst / 16 {
					if _, err := q.Enqueue(ctx, testArgs{}, Type("a")); err != nil {
						t.Error(err)
					}
				}
			})
		}
		wg.Wait()
		if n := count(t, burst); n < 1 || n >= burst/2 {
			t.Errorf("%d inserts of %d jobs notified themselves, want at least 1 and fewer than %d (the notifier sends for the rest)", n, burst, burst/2)
		}
	})
	quiet()
	if n := env.countWhere(t, "status = 'pending'"); n != 34 {
		t.Errorf("%d jobs pending, want 34", n)
	}
}
