package queue

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/stdlib"

	"github.com/jobqueue/jobqueue/db/pggen"
	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/testdb"
)

// offerOutcome waits for the outcome of a taken offer.
func offerOutcome(t *testing.T, o *claimOffer) offerResult {
	t.Helper()
	select {
	case res := <-o.done:
		return res
	case <-time.After(10 * time.Second):
		t.Fatal("the offer's outcome did not come within 10s")
		return offerResult{}
	}
}

// TestEnqueueRunsOfferedClaim: the first Enqueue after a quiet spell on
// PostgreSQL takes the offer of an idle claimer that wants its type and
// runs the claim in its own transaction (claim_offer.go): the claim takes
// the first due jobs (the new one, or an older one first); an offer of
// other types, or a job not due yet, is left alone; a refused insert runs
// no claim; a failed claim leaves the job written without it; a commit the
// server refuses (at the pipeline's sync point) writes and claims nothing,
// with or without an offer. The pool's
// connection comes back as it was.
func TestEnqueueRunsOfferedClaim(t *testing.T) {
	t.Parallel()
	env := newTestEnv(t, engine.Postgres)
	db := env.newPool(t)
	db.SetMaxOpenConns(1) // the connection checked after is the pipeline's
	sent := newStatementNames("InsertJobNotify", "InsertJob", "FlushCommits", "ClaimJobs", "NotifyUnclaimed")
	q := env.queue(t, db, WithLogger(testdb.QuietLogger()), withStatementHook(sent.hook))
	ctx := context.Background()
	quiet := func() { waitNotifierIdle(t, q) }
	clean := func(t *testing.T) {
		t.Helper()
		var sc, pcm string
		var xid sql.NullInt64
		if err := db.QueryRowContext(ctx, "SELECT current_setting('synchronous_commit'), current_setting('plan_cache_mode'), txid_current_if_assigned()").Scan(&sc, &pcm, &xid); err != nil {
			t.Fatalf("the pool's connection after the enqueue: %v", err)
		}
		if sc != "on" || pcm != "auto" || xid.Valid {
			t.Errorf("the pool's connection after the enqueue: synchronous_commit %q, plan_cache_mode %q, transaction %v; want on, auto and none", sc, pcm, xid)
		}
	}
	// nextNote returns the payload (the type) of the next notification on
	// the table's channel.
	lconn, err := env.newPool(t).Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer lconn.Close()
	if _, err := lconn.ExecContext(ctx, "LISTEN "+env.tbl.Quoted()); err != nil {
		t.Fatal(err)
	}
	nextNote := func(t *testing.T) string {
		t.Helper()
		var payload string
		err := lconn.Raw(func(dc any) error {
			wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			n, err := dc.(*stdlib.Conn).Conn().WaitForNotification(wctx)
			if err == nil {
				payload = n.Payload
			}
			return err
		})
		if err != nil {
			t.Fatalf("waiting for a notification: %v", err)
		}
		return payload
	}
	post := func(types []string, max int) *claimOffer {
		o := newClaimOffer(types, max, time.Minute, claimPos{})
		q.offers.post(o)
		return o
	}
	// claimAll takes what is due, so that each case starts from an empty
	// head of the queue.
	claimAll := func(t *testing.T) {
		t.Helper()
		if _, err := q.claimAfter(ctx, q.st, nil, maxClaim, time.Hour, claimPos{}); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("the new job", func(t *testing.T) {
		quiet()
		sent.take()
		o := post(nil, 5)
		before := time.Now().UTC()
		id, err := q.Enqueue(ctx, testArgs{N: 1}, Type("a"))
		if err != nil {
			t.Fatal(err)
		}
		res := offerOutcome(t, o)
		if res.err != nil || len(res.rows) != 1 || res.rows[0].ID != id {
			t.Fatalf("offer outcome: %d rows, err %v; want job %d alone", len(res.rows), res.err, id)
		}
		r := res.rows[0]
		ref := attemptRef{ID: r.ID, Token: r.ClaimToken}
		if r.Status != StatusInProgress || r.Attempts != 1 || !ref.wellFormed() || r.LeaseUntil == nil || r.LeaseUntil.Before(before.Add(time.Minute-time.Second)) {
			t.Errorf("claimed row: status %s, attempts %d, token %q, lease %v; want in_progress, 1, a token of job %d, a minute's lease", r.Status, r.Attempts, r.ClaimToken, r.LeaseUntil, id)
		}
		if j := getJob(t, q, id); j.Status != StatusInProgress || j.ClaimToken != r.ClaimToken {
			t.Errorf("job %d in the table: status %s token %q; want in_progress %q", id, j.Status, j.ClaimToken, r.ClaimToken)
		}
		if got := strings.Join(sent.take(), " "); got != "InsertJob ClaimJobs NotifyUnclaimed FlushCommits" {
			t.Errorf("statements %q, want the early insert's with the claim", got)
		}
		if q.offers.withdraw(o) {
			t.Error("the offer was still on the board after the enqueue took it")
		}
		// No one was told of the job the claim took: the next
		// notification is the next enqueue's.
		quiet()
		if _, err := q.Enqueue(ctx, testArgs{N: 1}, Type("marker")); err != nil {
			t.Fatal(err)
		}
		if got := nextNote(t); got != "marker" {
			t.Errorf("notification %q, want the marker's (none for the claimed job)", got)
		}
		clean(t)
	})
	t.Run("NotifyUnclaimed reads one row", func(t *testing.T) {
		// On this new table, without statistics: a plan that looked at
		// the status in its WHERE clause chose the status index, and one
		// that called currval there scanned the table.
		var rec queryRecorder
		st := q.st.(pgStore)
		if err := pggen.New(&rec).NotifyUnclaimed(ctx, pggen.NotifyUnclaimedParams{Channel: st.channel(), TableName: q.run.quoted}); !errors.Is(err, errRecorded) {
			t.Fatal(err)
		}
		text, err := q.run.text(rec.query)
		if err != nil {
			t.Fatal(err)
		}
		rows, err := env.db.QueryContext(ctx, "EXPLAIN "+text, rec.args...)
		if err != nil {
			t.Fatal(err)
		}
		var plan []string
		for rows.Next() {
			var line string
			if err := rows.Scan(&line); err != nil {
				t.Fatal(err)
			}
			plan = append(plan, line)
		}
		if err := errors.Join(rows.Err(), rows.Close()); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(plan[0], "Index Scan using "+env.table+"_pkey") {
			t.Errorf("NotifyUnclaimed's plan:\n%s\nwant an index scan of the primary key", strings.Join(plan, "\n"))
		}
	})
	t.Run("an older job first", func(t *testing.T) {
		claimAll(t)
		quiet()
		older, err := q.Enqueue(ctx, testArgs{N: 2}, Type("older"))
		if err != nil {
			t.Fatal(err)
		}
		if got := nextNote(t); got != "older" {
			t.Fatalf("notification %q, want older", got)
		}
		quiet()
		o := post(nil, 1)
		id, err := q.Enqueue(ctx, testArgs{N: 3}, Type("newer"))
		if err != nil {
			t.Fatal(err)
		}
		if got := nextNote(t); got != "newer" {
			t.Errorf("notification %q, want newer (the claim left it pending)", got)
		}
		res := offerOutcome(t, o)
		if res.err != nil || len(res.rows) != 1 || res.rows[0].ID != older {
			t.Fatalf("offer outcome: %v, err %v; want the older job %d", res.rows, res.err, older)
		}
		if j := getJob(t, q, id); j.Status != StatusPending {
			t.Errorf("the new job %d is %s, want pending (the claim took the older one)", id, j.Status)
		}
		clean(t)
	})
	t.Run("left alone", func(t *testing.T) {
		claimAll(t)
		for _, tc := range []struct {
			name  string
			types []string
			opts  []EnqueueOption
		}{
			{"another type", []string{"x"}, []EnqueueOption{Type("a")}},
			{"not due yet", nil, []EnqueueOption{Type("a"), At(time.Now().Add(time.Hour))}},
		} {
			quiet()
			o := post(tc.types, 5)
			id, err := q.Enqueue(ctx, testArgs{N: 4}, tc.opts...)
			if err != nil {
				t.Fatal(err)
			}
			if !q.offers.withdraw(o) {
				t.Errorf("%s: the enqueue took the offer", tc.name)
			}
			if j := getJob(t, q, id); j.Status != StatusPending {
				t.Errorf("%s: job %d is %s, want pending", tc.name, id, j.Status)
			}
		}
		clean(t)
	})
	t.Run("refused insert", func(t *testing.T) {
		claimAll(t)
		quiet()
		o := post(nil, 5)
		before := env.countWhere(t, "true")
		huge := RawArgs{Name: "raw", Payload: json.RawMessage(`[1e1000000]`)} // JSON, but beyond numeric
		if _, err := q.Enqueue(ctx, huge); !errors.Is(err, ErrPayloadRejected) {
			t.Fatalf("Enqueue of [1e1000000]: %v, want ErrPayloadRejected", err)
		}
		if res := offerOutcome(t, o); res.err == nil || len(res.rows) != 0 {
			t.Errorf("offer outcome: %d rows, err %v; want none and an error", len(res.rows), res.err)
		}
		if n := env.countWhere(t, "true"); n != before {
			t.Errorf("%d jobs after the refused enqueue, want %d", n, before)
		}
		clean(t)
	})
	t.Run("refused at commit", func(t *testing.T) {
		// A deferred constraint trigger refuses jobs of type "refused"
		// when their transaction commits: the pipeline's sync point.
		fn := engine.Table{Kind: engine.Postgres, Name: env.table + "_refuse"}.Quoted()
		for _, stmt := range []string{
			`CREATE FUNCTION ` + fn + `() RETURNS trigger LANGUAGE plpgsql AS $$
			BEGIN IF NEW.type = 'refused' THEN RAISE EXCEPTION 'jobs of type refused are refused at commit'; END IF; RETURN NULL; END $$`,
			`CREATE CONSTRAINT TRIGGER refuse AFTER INSERT ON ` + env.tbl.Quoted() + ` DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION ` + fn + `()`,
		} {
			if _, err := env.db.ExecContext(ctx, stmt); err != nil {
				t.Fatal(err)
			}
		}
		t.Cleanup(func() {
			if _, err := env.db.ExecContext(context.Background(), `DROP TRIGGER refuse ON `+env.tbl.Quoted()+`; DROP FUNCTION `+fn+`()`); err != nil {
				t.Error(err)
			}
		})
		for _, offered := range []bool{false, true} {
			claimAll(t)
			older, err := q.Enqueue(ctx, testArgs{N: 6}, Type("a"))
			if err != nil {
				t.Fatal(err)
			}
			quiet()
			sent.take()
			var o *claimOffer
			if offered {
				o = post(nil, 5)
			}
			before := env.countWhere(t, "true")
			if _, err := q.Enqueue(ctx, testArgs{N: 7}, Type("refused")); err == nil || !strings.Contains(err.Error(), "refused at commit") {
				t.Fatalf("offered %v: Enqueue refused at commit: %v, want the trigger's error", offered, err)
			}
			want := "InsertJobNotify FlushCommits"
			if offered {
				want = "InsertJob ClaimJobs NotifyUnclaimed FlushCommits"
			}
			if got := strings.Join(sent.take(), " "); got != want {
				t.Errorf("offered %v: statements %q, want %q (the early insert's)", offered, got, want)
			}
			if n := env.countWhere(t, "true"); n != before {
				t.Errorf("offered %v: %d jobs after the refused commit, want %d", offered, n, before)
			}
			if offered {
				if res := offerOutcome(t, o); res.err == nil || len(res.rows) != 0 {
					t.Errorf("offer outcome: %d rows, err %v; want none and an error", len(res.rows), res.err)
				}
			}
			// The claim of the older job was rolled back with the insert.
			if j := getJob(t, q, older); j.Status != StatusPending || j.Attempts != 0 {
				t.Errorf("offered %v: the older job %d is %s after %d attempts, want pending after 0", offered, older, j.Status, j.Attempts)
			}
			clean(t)
		}
	})
	t.Run("failed claim", func(t *testing.T) {
		claimAll(t)
		quiet()
		o := post(nil, -1) // LIMIT -1: the server refuses the claim
		id, err := q.Enqueue(ctx, testArgs{N: 5}, Type("a"))
		if err != nil {
			t.Fatalf("Enqueue with a failing offered claim: %v, want the job written without it", err)
		}
		if res := offerOutcome(t, o); res.err == nil || len(res.rows) != 0 {
			t.Errorf("offer outcome: %d rows, err %v; want none and the claim's error", len(res.rows), res.err)
		}
		if j := getJob(t, q, id); j.Status != StatusPending {
			t.Errorf("job %d is %s, want pending", id, j.Status)
		}
		if n := env.countWhere(t, "payload->>'n' = '5'"); n != 1 {
			t.Errorf("%d jobs of the enqueue, want 1", n)
		}
		clean(t)
	})
}

// offerPosts makes q tell on the returned channel that a worker posted
// its offer (a post while one is untold is not told again).
func offerPosts(q *Queue) <-chan struct{} {
	posted := make(chan struct{}, 1)
	q.offers.onPost = func() {
		select {
		case posted <- struct{}{}:
		default:
		}
	}
	return posted
}

// TestWorkerOfferedClaim: an idle worker on PostgreSQL posts its next claim
// and runs the job an Enqueue of its process claimed for it; a worker
// whose taken offer's claim failed claims as usual; a worker
// stopped while its claim is taken but not yet told waits for the outcome
// before Run returns and gives back what the claim took, never started
// (claim_late.go: its stop does not wait for a claim in flight); a stopped
// worker leaves no offer behind.
func TestWorkerOfferedClaim(t *testing.T) {
	t.Parallel()
	env := newTestEnv(t, engine.Postgres)
	q := env.queue(t, nil, WithLogger(testdb.QuietLogger()))
	posted := offerPosts(q)
	var takes atomic.Int64
	q.offers.onTake = func() { takes.Add(1) }
	var runs atomic.Int64
	started := make(chan int64, 16)
	// PollOnly: no listener, whose wake-up when it connects would take
	// the first offer down and up again while the test enqueues; only
	// this process's enqueues wake the worker.
	w := q.NewWorker(WorkerConfig{Concurrency: 2, PollInterval: time.Hour, PollOnly: true, Lease: time.Minute})
	Handle(w, func(ctx context.Context, job *Job[testArgs]) error {
		runs.Add(1)
		started <- job.ID
		return nil
	})
	ctx := context.Background()
	stop, _ := startWorker(t, w)

	// The first claim finds nothing; the worker offers its next one.
	select {
	case <-posted:
	case <-time.After(10 * time.Second):
		t.Fatal("the idle worker posted no offer within 10s")
	}
	waitNotifierIdle(t, q)
	id, err := q.Enqueue(ctx, testArgs{N: 1})
	if err != nil {
		t.Fatal(err)
	}
	// ran waits for the worker to start job want, the next it starts.
	ran := func(want int64, what string) {
		t.Helper()
		select {
		case got := <-started:
			if got != want {
				t.Fatalf("the worker ran job %d, want %d", got, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: job %d did not start within 10s", what, want)
		}
	}
	// nextOffer takes the worker's next offer off the board, as an enqueue
	// would.
	nextOffer := func() *claimOffer {
		t.Helper()
		var o *claimOffer
		waitUntil(t, 10*time.Second, "the worker's next offer", func() bool {
			o = q.offers.take("")
			return o != nil
		})
		return o
	}
	ran(id, "the offered claim")
	if n := takes.Load(); n != 1 {
		t.Errorf("the enqueue took %d offers, want 1", n)
	}

	// An enqueue that took the worker's offer and whose claim failed (its
	// transaction refused, say) tells the worker so: it claims as usual
	// and finds the job that is still pending.
	failed := nextOffer()
	id3, err := q.Enqueue(ctx, testArgs{N: 3}) // the board is empty: no offered claim
	if err != nil {
		t.Fatal(err)
	}
	failed.settle(nil, errors.New("the offered claim failed"))
	ran(id3, "after a failed offered claim, the pending job")

	// Take the worker's next offer as an enqueue would, and tell its
	// outcome only after the worker was told to stop.
	o := nextOffer()
	id2, err := q.Enqueue(ctx, testArgs{N: 2}) // wakes the worker, which must wait for o
	if err != nil {
		t.Fatal(err)
	}
	stopped := make(chan error, 1)
	go func() { stopped <- stop(30 * time.Second) }()
	select {
	case err := <-stopped:
		t.Fatalf("Run returned (%v) before the outcome of its taken claim", err)
	case <-time.After(100 * time.Millisecond): // still waiting, as it must
	}
	rows, err := q.claimAfter(ctx, q.st, o.types, o.max, o.lease, o.after)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 || rows[0].ID != id2 {
		t.Fatalf("the taken claim took %v, want job %d", rows, id2)
	}
	o.settle(rows, nil)
	if err := <-stopped; err != nil {
		t.Fatal(err)
	}
	if j := getJob(t, q, id2); j.Status != StatusPending || j.Attempts != 0 {
		t.Errorf("job %d, claimed for the stopping worker, is %s, attempts %d; want pending, attempts 0 (given back)", id2, j.Status, j.Attempts)
	}
	if n := runs.Load(); n != 2 {
		t.Errorf("%d runs, want 2", n)
	}
	q.offers.mu.Lock()
	left := len(q.offers.offers)
	q.offers.mu.Unlock()
	if left != 0 {
		t.Errorf("%d offers on the board after the worker stopped, want none", left)
	}
}

// TestClaimerOfferSize: an idle claimer offers a claim of its free slots,
// at most offerMaxJobs, within MaxJobs; none with no slot free, and none
// when no enqueue of its process could take it (the early commit ruled
// out).
func TestClaimerOfferSize(t *testing.T) {
	t.Parallel()
	env := newTestEnv(t, engine.Postgres)
	q := env.queue(t, nil, WithLogger(testdb.QuietLogger()))
	for _, tc := range []struct {
		name                string
		conc, maxJobs       int
		held, claimed, want int // want 0: no offer
	}{
		{"free slots", 4, 0, 1, 0, 3},
		{"capped", 100, 0, 0, 0, offerMaxJobs},
		{"no slot free", 4, 0, 4, 0, 0},
		{"within MaxJobs", 8, 10, 0, 8, 2},
		{"MaxJobs reached", 8, 10, 0, 10, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &claimer{q: q, cfg: WorkerConfig{Concurrency: tc.conc, MaxJobs: tc.maxJobs, Lease: time.Minute}, cursor: &claimCursor{q: q}}
			o := c.offer(tc.held, tc.claimed)
			switch {
			case tc.want == 0 && o != nil:
				t.Errorf("offer of %d jobs, want none", o.max)
			case tc.want > 0 && o == nil:
				t.Errorf("no offer, want one of %d jobs", tc.want)
			case o != nil && o.max != tc.want:
				t.Errorf("offer of %d jobs, want %d", o.max, tc.want)
			}
			if o != nil && !q.offers.withdraw(o) {
				t.Error("the offer was not on the board")
			}
		})
	}
	// No enqueue of this process could take an offer: none is made.
	st := q.st.(pgStore)
	for _, tc := range []struct {
		name         string
		rule, unrule func()
	}{
		{"FlushCommits refused", func() { st.early.state.Store(earlyRefused) }, func() { st.early.state.Store(earlyUnknown) }},
		{"not pgx's driver", func() { st.r.noPgx.Store(true) }, func() { st.r.noPgx.Store(false) }},
		{"a transaction pooler", func() { q.setPooled(true) }, func() { q.setPooled(false) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &claimer{q: q, cfg: WorkerConfig{Concurrency: 4, Lease: time.Minute}, cursor: &claimCursor{q: q}}
			tc.rule()
			o := c.offer(0, 0)
			tc.unrule()
			if o != nil {
				q.offers.withdraw(o)
				t.Errorf("offer of %d jobs, want none (no enqueue takes offers)", o.max)
			}
			if o := c.offer(0, 0); o == nil || !q.offers.withdraw(o) {
				t.Error("no offer on the board once the early commit may run again")
			}
		})
	}
}
