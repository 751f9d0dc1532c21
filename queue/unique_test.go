package queue

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jobqueue/jobqueue/internal/ddl"
	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/migrations"
)

// enqueueKey enqueues a job with key k (and opts) and returns its id and
// whether it was a duplicate, failing the test on any other error.
func enqueueKey(t *testing.T, q *Queue, k string, opts ...EnqueueOption) (int64, bool) {
	t.Helper()
	id, err := q.Enqueue(context.Background(), testArgs{N: 1}, append([]EnqueueOption{UniqueKey(k)}, opts...)...)
	var dup *DuplicateError
	switch {
	case err == nil:
		return id, false
	case errors.As(err, &dup) && errors.Is(err, ErrDuplicate):
		if dup.ID != id || dup.Key != k {
			t.Fatalf("duplicate error %+v, returned id %d", dup, id)
		}
		return id, true
	}
	t.Fatalf("Enqueue with key %q: %v", k, err)
	return 0, false
}

// wantDup checks that an enqueue of k is a duplicate of id.
func wantDup(t *testing.T, q *Queue, k string, id int64) {
	t.Helper()
	got, dup := enqueueKey(t, q, k)
	if !dup || got != id {
		t.Fatalf("enqueue of %q = %d (duplicate %v), want a duplicate of %d", k, got, dup, id)
	}
}

// wantNew checks that an enqueue of k creates a job other than the ids.
func wantNew(t *testing.T, q *Queue, k string, not ...int64) int64 {
	t.Helper()
	got, dup := enqueueKey(t, q, k)
	if dup {
		t.Fatalf("enqueue of %q is a duplicate of %d, want a new job", k, got)
	}
	for _, id := range not {
		if got == id {
			t.Fatalf("enqueue of %q returned the old job %d", k, id)
		}
	}
	return got
}

// newKeyed enqueues a new job with key k and opts, failing on a duplicate.
func newKeyed(t *testing.T, q *Queue, k string, opts ...EnqueueOption) int64 {
	t.Helper()
	id, dup := enqueueKey(t, q, k, opts...)
	if dup {
		t.Fatalf("enqueue of %q is a duplicate of %d, want a new job", k, id)
	}
	return id
}

func completeJob(t *testing.T, q *Queue, typ string) {
	t.Helper()
	jobs := mustClaim(t, q, []string{typ}, 1, time.Minute)
	if len(jobs) != 1 {
		t.Fatalf("nothing to claim of type %s", typ)
	}
	if stale, err := q.complete(context.Background(), []attemptRef{jobs[0].ref()}); err != nil || len(stale) != 0 {
		t.Fatalf("complete = %v, %v", stale, err)
	}
}

func TestUniqueLife(t *testing.T) {
	forEachEngine(t, func(t *testing.T, kind engine.Kind) {
		ctx := context.Background()
		env := coreEnv(t, kind)
		q, clock := coreQueue(t, env)

		// Pending, then running: a duplicate; finished: free again.
		a := wantNew(t, q, "k")
		wantDup(t, q, "k", a)
		completeJob(t, q, DefaultType)
		b := wantNew(t, q, "k", a)
		mustClaim(t, q, nil, 1, time.Minute)
		wantDup(t, q, "k", b)
		if err := q.Cancel(ctx, b); err != nil {
			t.Fatal(err)
		}
		c := wantNew(t, q, "k", a, b)
		if n := env.countWhere(t, "1=1"); n != 3 {
			t.Fatalf("%d jobs, want 3", n)
		}

		// Retry of b (cancelled) is refused while c holds the key, and
		// leaves b as it was.
		before := getJob(t, q, b)
		ok, err := q.Retry(ctx, b)
		if ok || !errors.Is(err, ErrDuplicate) || !strings.Contains(err.Error(), fmt.Sprint(c)) {
			t.Fatalf("Retry(%d) while %d holds the key = %v, %v; want ErrDuplicate naming %d", b, c, ok, err, c)
		}
		if after := getJob(t, q, b); fmt.Sprintf("%+v", before) != fmt.Sprintf("%+v", after) {
			t.Fatalf("the refused Retry changed the job")
		}
		// Once c finished, b may run again, and holds the key.
		if err := q.Cancel(ctx, c); err != nil {
			t.Fatal(err)
		}
		if ok, err := q.Retry(ctx, b); !ok || err != nil {
			t.Fatalf("Retry(%d) with the key free = %v, %v", b, ok, err)
		}
		wantDup(t, q, "k", b)
		// c cannot come back now.
		if ok, err := q.Retry(ctx, c); ok || !errors.Is(err, ErrDuplicate) {
			t.Fatalf("Retry(%d) while %d holds the key again = %v, %v", c, b, ok, err)
		}

		// UniqueFor keeps the key after the job finished, until the period
		// ends.
		p := newKeyed(t, q, "period", Type("pe"), UniqueFor(time.Hour))
		completeJob(t, q, "pe")
		wantDup(t, q, "period", p)
		clock.add(59 * time.Minute)
		wantDup(t, q, "period", p)
		clock.add(2 * time.Minute)
		wantNew(t, q, "period", p)

		// Delete frees a key, even within its period.
		d := newKeyed(t, q, "deleted", UniqueFor(time.Hour))
		if err := q.Delete(ctx, d); err != nil {
			t.Fatal(err)
		}
		wantNew(t, q, "deleted", d)

		// Prune frees the keys of the jobs it deletes, and their rows go.
		pr := newKeyed(t, q, "pruned", Type("pr"), UniqueFor(time.Hour))
		completeJob(t, q, "pr")
		wantDup(t, q, "pruned", pr)
		clock.add(time.Second)
		if n, err := q.Prune(ctx, 0); err != nil || n == 0 {
			t.Fatalf("Prune = %d, %v", n, err)
		}
		wantNew(t, q, "pruned", pr)
		side := ddl.Side(env.tbl, "unique")
		var orphans int
		if err := env.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+side.Quoted()+" u WHERE NOT EXISTS (SELECT 1 FROM "+env.tbl.Quoted()+" j WHERE j.id = u.job_id)").Scan(&orphans); err != nil {
			t.Fatal(err)
		}
		if orphans != 0 {
			t.Errorf("%d key rows of deleted jobs left after Prune", orphans)
		}
	})
}

func TestUniqueBadInput(t *testing.T) {
	forEachEngine(t, func(t *testing.T, kind engine.Kind) {
		ctx := context.Background()
		env := coreEnv(t, kind)
		q, _ := coreQueue(t, env)
		cases := []struct {
			name string
			opts []EnqueueOption
			want string
		}{
			{"empty key", []EnqueueOption{UniqueKey("")}, "empty"},
			{"key too long", []EnqueueOption{UniqueKey(strings.Repeat("é", 256))}, "256 characters"},
			{"key not UTF-8", []EnqueueOption{UniqueKey("a\xff")}, "UTF-8"},
			{"negative period", []EnqueueOption{UniqueKey("k"), UniqueFor(-time.Second)}, "negative"},
			{"period without key", []EnqueueOption{UniqueFor(time.Hour)}, "without UniqueKey"},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				if _, err := q.Enqueue(ctx, testArgs{}, c.opts...); !errors.Is(err, ErrInvalidJob) || !strings.Contains(err.Error(), c.want) {
					t.Errorf("Enqueue = %v; want ErrInvalidJob saying %q", err, c.want)
				}
				if _, err := q.EnqueueMany(ctx, []JobArgs{testArgs{}, WithOptions(testArgs{}, c.opts...)}); !errors.Is(err, ErrInvalidJob) {
					t.Errorf("EnqueueMany = %v; want ErrInvalidJob", err)
				}
			})
		}
		// The longest key is fine.
		wantNew(t, q, strings.Repeat("é", 255))
		if n := rowCount(t, env); n != 1 {
			t.Errorf("%d rows after the bad enqueues, want 1", n)
		}
	})
}

// TestUniqueConcurrent runs 32 concurrent enqueuers of one key, on a new
// key and on a key whose holder has finished: each time exactly one job is
// created and every enqueuer gets its id.
func TestUniqueConcurrent(t *testing.T) {
	forEachEngine(t, func(t *testing.T, kind engine.Kind) {
		env := coreEnv(t, kind)
		q, _ := coreQueue(t, env)
		race := func(round string) int64 {
			t.Helper()
			const n = 32
			ids := make([]int64, n)
			errs := make([]error, n)
			var wg sync.WaitGroup
			start := make(chan struct{})
			for i := range n {
				wg.Go(func() {
					<-start
					ids[i], errs[i] = q.Enqueue(context.Background(), testArgs{N: i}, UniqueKey("race"), Type(round))
				})
			}
			close(start)
			wg.Wait()
			created := 0
			for i := range n {
				switch {
				case errs[i] == nil:
					created++
				case !errors.Is(errs[i], ErrDuplicate):
					t.Fatalf("%s: enqueuer %d: %v", round, i, errs[i])
				}
				if ids[i] != ids[0] {
					t.Fatalf("%s: enqueuers got ids %d and %d", round, ids[0], ids[i])
				}
			}
			if created != 1 {
				t.Fatalf("%s: %d enqueuers created a job, want 1", round, created)
			}
			if got := env.countWhere(t, "type = ?", round); got != 1 {
				t.Fatalf("%s: %d jobs, want 1", round, got)
			}
			return ids[0]
		}
		race("fresh")
		completeJob(t, q, "fresh")
		race("after")
	})
}

func TestUniqueTx(t *testing.T) {
	forEachEngine(t, func(t *testing.T, kind engine.Kind) {
		ctx := context.Background()
		env := coreEnv(t, kind)
		q, _ := coreQueue(t, env)

		// A rollback frees the key.
		tx, err := env.db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := q.EnqueueTx(ctx, tx, testArgs{}, UniqueKey("tx")); err != nil {
			t.Fatal(err)
		}
		if err := tx.Rollback(); err != nil {
			t.Fatal(err)
		}
		a := wantNew(t, q, "tx")

		// A duplicate in a transaction writes nothing and leaves the
		// transaction usable.
		tx, err = env.db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		id, err := q.EnqueueTx(ctx, tx, testArgs{}, UniqueKey("tx"))
		if !errors.Is(err, ErrDuplicate) || id != a {
			t.Fatalf("EnqueueTx of a held key = %d, %v; want %d, ErrDuplicate", id, err, a)
		}
		b, err := q.EnqueueTx(ctx, tx, testArgs{}, UniqueKey("tx2"))
		if err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		wantDup(t, q, "tx2", b)
		if n := rowCount(t, env); n != 2 {
			t.Fatalf("%d rows, want 2", n)
		}

		// EnqueueMany: keys within the call and against existing jobs.
		n, err := q.EnqueueMany(ctx, []JobArgs{
			WithOptions(testArgs{N: 1}, UniqueKey("m")),
			WithOptions(testArgs{N: 2}, UniqueKey("m")),
			testArgs{N: 3},
			WithOptions(testArgs{N: 4}, UniqueKey("tx")),
			WithOptions(testArgs{N: 5}, UniqueKey("m2"), Type("other")),
		})
		if err != nil || n != 3 {
			t.Fatalf("EnqueueMany = %d, %v; want 3 written", n, err)
		}
		if got := env.countWhere(t, "type = 'other'"); got != 1 {
			t.Errorf("the job's own Type was not applied (%d jobs of type other)", got)
		}
		tx, err = env.db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if n, err := q.EnqueueManyTx(ctx, tx, []JobArgs{WithOptions(testArgs{}, UniqueKey("m3")), WithOptions(testArgs{}, UniqueKey("m"))}); err != nil || n != 1 {
			t.Fatalf("EnqueueManyTx = %d, %v; want 1", n, err)
		}
		if err := tx.Rollback(); err != nil {
			t.Fatal(err)
		}
		wantNew(t, q, "m3")
		if n := rowCount(t, env); n != 6 {
			t.Fatalf("%d rows, want 6", n)
		}
	})
}

// TestUniqueWithoutSideTable: a table installed before unique keys (no
// side table) keeps working; a keyed enqueue says to run Install and writes
// nothing; Install adds the side table.
func TestUniqueWithoutSideTable(t *testing.T) {
	forEachEngine(t, func(t *testing.T, kind engine.Kind) {
		ctx := context.Background()
		env := coreEnv(t, kind)
		env.exec(t, ddl.DropTable(ddl.Side(env.tbl, "unique")))
		q, _ := coreQueue(t, env)
		id := mustEnqueue(t, q, testArgs{})
		if _, err := q.Enqueue(ctx, testArgs{}, UniqueKey("k")); !errors.Is(err, ErrSideTableMissing) || !strings.Contains(err.Error(), "Install") {
			t.Fatalf("keyed Enqueue without the side table = %v; want ErrSideTableMissing naming Install", err)
		}
		if _, err := q.EnqueueMany(ctx, []JobArgs{testArgs{}, WithOptions(testArgs{}, UniqueKey("k"))}); !errors.Is(err, ErrSideTableMissing) {
			t.Fatalf("keyed EnqueueMany without the side table = %v", err)
		}
		if n := rowCount(t, env); n != 1 {
			t.Fatalf("%d rows, want 1: the failed calls wrote something", n)
		}
		// Everything else works.
		if err := q.Cancel(ctx, id); err != nil {
			t.Fatal(err)
		}
		if ok, err := q.Retry(ctx, id); !ok || err != nil {
			t.Fatalf("Retry = %v, %v", ok, err)
		}
		if _, err := q.Prune(ctx, 0); err != nil {
			t.Fatal(err)
		}
		if err := q.Cancel(ctx, id); err != nil {
			t.Fatal(err)
		}
		if err := q.Delete(ctx, id); err != nil {
			t.Fatal(err)
		}
		if err := migrations.Install(ctx, env.db, env.table); err != nil {
			t.Fatal(err)
		}
		wantNew(t, q, "k")
	})
}
