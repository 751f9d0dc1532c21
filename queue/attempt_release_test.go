package queue

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/testdb"
)

func TestChunkRefsKeepsIDsApart(t *testing.T) {
	var refs []attemptRef
	for i := 0; i < 2500; i++ {
		refs = append(refs, attemptRef{ID: int64(i), Token: fmt.Sprint("a-", i)})
	}
	refs = append(refs, attemptRef{ID: 7, Token: "b-7"}, attemptRef{ID: 7, Token: "c-7"})
	chunks := chunkRefs(refs)
	total := 0
	for _, c := range chunks {
		if len(c) > maxListLen {
			t.Fatalf("chunk of %d", len(c))
		}
		seen := map[int64]bool{}
		for _, r := range c {
			if seen[r.ID] {
				t.Fatalf("id %d twice in one chunk", r.ID)
			}
			seen[r.ID] = true
		}
		total += len(c)
	}
	if total != len(refs) {
		t.Fatalf("%d refs in chunks, want %d", total, len(refs))
	}
}

// TestWriteHeld: the refs that held no job are the malformed ones, never
// sent, and those the write did not report held; every well-formed ref is
// sent once, in chunks; a write's error returns the refs found so far.
func TestWriteHeld(t *testing.T) {
	var refs []attemptRef
	for i := range int64(2000) {
		refs = append(refs, attemptRef{ID: i, Token: attemptToken("a", i)})
	}
	refs = append(refs, attemptRef{ID: 5000, Token: "a-1"}, attemptRef{ID: 5001, Token: ""})
	sent := map[int64]int{}
	calls := 0
	notHeld, err := writeHeld(refs, func(chunk []attemptRef) (map[int64]bool, error) {
		calls++
		held := map[int64]bool{}
		for _, r := range chunk {
			sent[r.ID]++
			held[r.ID] = r.ID%3 != 0
		}
		return held, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if calls < 2 || len(sent) != 2000 {
		t.Errorf("%d writes sent %d ids, want 2000 ids in 2 or more chunks", calls, len(sent))
	}
	for id, n := range sent {
		if n != 1 || id >= 2000 {
			t.Errorf("id %d sent %d times, want the 2000 well-formed ones once each", id, n)
		}
	}
	want := map[int64]bool{5000: true, 5001: true}
	for i := int64(0); i < 2000; i += 3 {
		want[i] = true
	}
	got := map[int64]bool{}
	for _, r := range notHeld {
		got[r.ID] = true
	}
	if len(notHeld) != len(want) || len(got) != len(want) {
		t.Errorf("%d refs not held (%d ids), want %d", len(notHeld), len(got), len(want))
	}
	for id := range want {
		if !got[id] {
			t.Errorf("ref %d missing from the refs not held", id)
		}
	}

	boom := errors.New("boom")
	notHeld, err = writeHeld(refs, func([]attemptRef) (map[int64]bool, error) { return nil, boom })
	if !errors.Is(err, boom) || len(notHeld) != 2 {
		t.Errorf("a failing write: %d refs not held, %v; want the 2 malformed and boom", len(notHeld), err)
	}
}

func TestRelease(t *testing.T) {
	forEachEngine(t, func(t *testing.T, kind engine.Kind) {
		ctx := context.Background()
		env := coreEnv(t, kind)
		q, clock := coreQueue(t, env)
		one := Policy(RetryPolicy{MaxAttempts: 1, BaseDelay: time.Second, MaxDelay: time.Second})
		again := mustEnqueue(t, q, testArgs{N: 1})
		usedUp := mustEnqueue(t, q, testArgs{N: 2}, one)
		overdue := mustEnqueue(t, q, testArgs{N: 3}, ExpiresIn(time.Second))
		other := mustEnqueue(t, q, testArgs{N: 4})
		jobs := mustClaim(t, q, nil, 4, time.Hour)
		clock.add(time.Second)
		var refs []attemptRef
		for _, j := range jobs {
			if j.ID != other {
				refs = append(refs, j.ref())
			}
		}
		bogus := attemptRef{ID: other, Token: "x-" + fmt.Sprint(other)}
		stale, err := q.release(ctx, append(refs, bogus))
		if err != nil || len(stale) != 1 || stale[0] != bogus {
			t.Fatalf("release: stale %v, %v", stale, err)
		}
		want := map[int64]Status{again: StatusPending, usedUp: StatusFailed, overdue: StatusExpired, other: StatusInProgress}
		for id, st := range want {
			j := getJob(t, q, id)
			if j.Status != st {
				t.Fatalf("job %d is %s, want %s", id, j.Status, st)
			}
			if st == StatusInProgress {
				continue
			}
			if j.ClaimToken != "" || j.LeaseUntil != nil || j.Error != releaseError || (st == StatusPending) != (j.FinishedAt == nil) {
				t.Fatalf("released job %+v", j)
			}
			if st == StatusPending && !j.ScheduledAt.Equal(clock.now()) {
				t.Fatalf("released job due at %v, want now %v", j.ScheduledAt, clock.now())
			}
		}
		// Released refs are stale afterwards.
		if stale, err := q.complete(ctx, refs); err != nil || len(stale) != len(refs) {
			t.Fatalf("complete after release: stale %d of %d, %v", len(stale), len(refs), err)
		}
	})
}

// BenchmarkClaimBatch measures one claim of up to batch jobs and one
// batched completion of them, on a table holding 20 000 pending jobs.
func BenchmarkClaimBatch(b *testing.B) {
	for _, kind := range testdb.Kinds() {
		for _, batch := range []int{8, 64} {
			b.Run(fmt.Sprintf("%s/batch=%d", kind, batch), func(b *testing.B) {
				ctx := context.Background()
				url := testdb.URL(b, kind)
				db := testdb.OpenURL(b, url)
				table := testdb.Table(b, db)
				if err := migrationsInstall(ctx, db, table); err != nil {
					b.Fatal(err)
				}
				q, err := New(db, WithTable(table), WithLogger(testdb.QuietLogger()))
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() {
					if err := q.Close(); err != nil {
						b.Errorf("closing the queue: %v", err)
					}
				})
				fill := func() {
					args := make([]JobArgs, 20000)
					for i := range args {
						args[i] = testArgs{N: i}
					}
					if _, err := q.EnqueueMany(ctx, args); err != nil {
						b.Fatal(err)
					}
				}
				fill()
				var claimT, completeT time.Duration
				jobs := 0
				b.ResetTimer()
				for b.Loop() {
					t0 := time.Now()
					rows, err := q.claim(ctx, nil, batch, time.Minute)
					if err != nil {
						b.Fatal(err)
					}
					if len(rows) == 0 {
						b.StopTimer()
						fill()
						b.StartTimer()
						continue
					}
					t1 := time.Now()
					refs := make([]attemptRef, len(rows))
					for i, r := range rows {
						refs[i] = r.ref()
					}
					if stale, err := q.complete(ctx, refs); err != nil || len(stale) > 0 {
						b.Fatal(err, len(stale))
					}
					claimT += t1.Sub(t0)
					completeT += time.Since(t1)
					jobs += len(rows)
				}
				b.ReportMetric(float64(jobs)/(claimT+completeT).Seconds(), "jobs/s")
				b.ReportMetric(float64(claimT.Microseconds())/float64(b.N), "claim-µs/op")
				b.ReportMetric(float64(completeT.Microseconds())/float64(b.N), "complete-µs/op")
			})
		}
	}
}

// TestReleaseWithMalformedRefsWakesWorkers: release counted the malformed
// refs (reported stale without touching the table) against the released
// ones, so a release of one job plus one malformed ref neither logged nor
// woke the idle workers of this process, which then waited for their poll.
func TestReleaseWithMalformedRefsWakesWorkers(t *testing.T) {
	forEachEngine(t, func(t *testing.T, kind engine.Kind) {
		ctx := context.Background()
		env := coreEnv(t, kind)
		q, _ := coreQueue(t, env)
		id := mustEnqueue(t, q, testArgs{N: 1})
		job := mustClaim(t, q, nil, 1, time.Hour)[0]
		woken := q.wake.wait()
		malformed := attemptRef{ID: id, Token: "not-a-token"}
		stale, err := q.release(ctx, []attemptRef{malformed, job.ref()})
		if err != nil || len(stale) != 1 || stale[0] != malformed {
			t.Fatalf("release: stale %v, %v; want only the malformed ref", stale, err)
		}
		if j := getJob(t, q, id); j.Status != StatusPending {
			t.Fatalf("released job is %s, want pending", j.Status)
		}
		select {
		case <-woken:
		default:
			t.Fatal("releasing a job back to pending did not wake this process's workers")
		}
	})
}

// TestClaimTokenFormat: every claim statement (every type, one type,
// several types) writes the token attemptToken(batch, id), and those
// tokens are well formed while others are not.
func TestClaimTokenFormat(t *testing.T) {
	forEachEngine(t, func(t *testing.T, kind engine.Kind) {
		ctx := context.Background()
		env := coreEnv(t, kind)
		q, clock := coreQueue(t, env)
		for i := 0; i < 3; i++ {
			for _, typ := range []string{"a", "b", "c"} {
				mustEnqueue(t, q, testArgs{N: i}, Type(typ))
			}
		}
		for i, types := range [][]string{{"a"}, {"b", "c"}, nil} {
			t.Run(fmt.Sprintf("types %v", types), func(t *testing.T) {
				batch := fmt.Sprintf("%032x", i+1)
				now := clock.now()
				jobs, err := q.st.claim(ctx, types, 3, batch, now, now.Add(time.Minute), claimPos{})
				if err != nil || len(jobs) != 3 {
					t.Fatalf("claim(%v) = %d jobs, %v; want 3", types, len(jobs), err)
				}
				for _, j := range jobs {
					want := attemptToken(batch, j.ID)
					if j.ClaimToken != want || getJob(t, q, j.ID).ClaimToken != want {
						t.Fatalf("job %d: claim returned token %q, row holds %q; want %q", j.ID, j.ClaimToken, getJob(t, q, j.ID).ClaimToken, want)
					}
					if !j.ref().wellFormed() {
						t.Fatalf("token %q of job %d is not well formed", j.ClaimToken, j.ID)
					}
				}
			})
		}
	})
	for _, r := range []attemptRef{{ID: 12, Token: "-12"}, {ID: 12, Token: "x-2"}, {ID: 12, Token: "x-012"}, {ID: 12, Token: "12"}, {ID: 12, Token: ""}} {
		if r.wellFormed() {
			t.Errorf("%+v is well formed", r)
		}
	}
	if r := (attemptRef{ID: 12, Token: attemptToken("a-b", 12)}); !r.wellFormed() || r.Token != "a-b-12" {
		t.Errorf("%+v is not well formed", r)
	}
}
