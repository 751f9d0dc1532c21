package queue

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jobqueue/jobqueue/db/mysqlgen"
	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/testdb"
)

// Tests of the wake-ups across processes on MySQL (wake_mysql.go). As in
// notify_postgres_test.go, every worker runs on a pool of its own, as on
// another machine, with a poll interval of a minute: only a wake-up can make
// it claim within the few seconds each test waits.

// waitingSessionsOf returns the sessions that hold a wake slot of env's table.
func waitingSessionsOf(t *testing.T, env *testEnv) []int64 {
	t.Helper()
	ids, err := readSlotHolders(context.Background(), env.db, env.tbl.Name)
	if err != nil {
		t.Fatalf("reading the wake slots' holders: %v", err)
	}
	return ids
}

// waiterSession waits until one session holds a wake slot of env's table
// and waits there (its statement is WaitForEnqueues), and returns its id.
func waiterSession(t *testing.T, env *testEnv) int64 {
	t.Helper()
	var id int64
	waitUntil(t, 30*time.Second, "a session waiting on a wake slot of the table", func() bool {
		ids := waitingSessionsOf(t, env)
		if len(ids) != 1 {
			return false
		}
		id = ids[0]
		return sessionStatement(t, env, id) == "WAIT"
	})
	return id
}

// sessionStatement tells what session id runs: "WAIT" (WaitForEnqueues),
// "" (no statement: idle, or the session has ended), or "other".
func sessionStatement(t *testing.T, env *testEnv, id int64) string {
	t.Helper()
	var info sql.NullString
	err := env.db.QueryRow("SELECT INFO FROM information_schema.PROCESSLIST WHERE ID = ?", id).Scan(&info)
	switch {
	case errors.Is(err, sql.ErrNoRows), err == nil && !info.Valid:
		return ""
	case err != nil:
		t.Fatalf("reading the processlist: %v", err)
	}
	if strings.Contains(info.String, "WaitForEnqueues") {
		return "WAIT"
	}
	return "other"
}

// mysqlClaimRunning reports whether a claim on env's table runs.
func mysqlClaimRunning(t *testing.T, env *testEnv) bool {
	t.Helper()
	var n int
	if err := env.db.QueryRow(`SELECT COUNT(*) FROM information_schema.PROCESSLIST
		WHERE DB = DATABASE() AND ID <> CONNECTION_ID() AND INSTR(INFO, 'SKIP LOCKED') > 0 AND INSTR(INFO, ?) > 0`,
		env.tbl.Quoted()).Scan(&n); err != nil {
		t.Fatalf("reading the processlist: %v", err)
	}
	return n > 0
}

// TestMySQLWakeWorkersOfOtherPools: Enqueue and EnqueueMany on one pool make
// an idle worker on another pool start the jobs at once; the worker waits
// again on the same session afterwards; an enqueue into another table and a
// row inserted by hand do not wake it; EnqueueTx and EnqueueManyTx, whose
// commit the queue cannot see, wake it after the commit (a rolled-back one
// runs nothing).
func TestMySQLWakeWorkersOfOtherPools(t *testing.T) {
	t.Parallel()
	s := newWakeSetup(t, engine.MySQL, nil)
	ctx := context.Background()
	waiter := waiterSession(t, s.env)
	s.waitClaims(t, 2) // the claim at start and the one when the wait began
	p := s.producer
	other := newTestEnv(t, engine.MySQL)
	otherQ := other.queue(t, nil, WithLogger(testdb.QuietLogger()))
	for _, c := range append(ownCommitCases(t, p), []wakeCase{
		{"another table", func() int {
			if _, err := otherQ.Enqueue(ctx, emailArgs{}, Type("email")); err != nil {
				t.Fatal(err)
			}
			return 0
		}},
		{"a row inserted by hand", func() int {
			s.env.exec(t, `INSERT INTO {t} (name, type, payload, status, attempts, max_attempts, base_delay, max_delay, scheduled_at, created_at)
				VALUES ('email', 'email', '{}', 'pending', 0, 3, 1, 1, UTC_TIMESTAMP() - INTERVAL 1 SECOND, UTC_TIMESTAMP())`)
			return 0
		}},
	}...) {
		n := c.do()
		if n == 0 {
			s.quiet(t, 300*time.Millisecond, c.name)
			continue
		}
		waitRan(t, s.ran, n, c.name)
		waitUntil(t, 30*time.Second, "the worker to wait again", func() bool {
			return sessionStatement(t, s.env, waiter) == "WAIT" && !mysqlClaimRunning(t, s.env)
		})
		if ids := waitingSessionsOf(t, s.env); len(ids) != 1 || ids[0] != waiter {
			t.Fatalf("after %s: the sessions holding wake slots are %v, want the same one (%d)", c.name, ids, waiter)
		}
	}
	// The row inserted by hand would run at the next wake-up: remove it.
	s.env.exec(t, "DELETE FROM {t} WHERE status = 'pending'")
	// In a caller's transaction: the queue cannot see the commit, and its
	// shots after the call wake the worker once it has happened.
	for _, c := range []struct {
		name   string
		commit bool
		n      int
	}{
		{"EnqueueTx committed", true, 1},
		{"EnqueueManyTx committed", true, 2},
		{"EnqueueTx rolled back", false, 0},
	} {
		tx, err := s.env.db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if c.n == 2 {
			_, err = p.EnqueueManyTx(ctx, tx, []JobArgs{emailArgs{}, emailArgs{}}, Type("email"))
		} else {
			_, err = p.EnqueueTx(ctx, tx, emailArgs{}, Type("email"))
		}
		if err != nil {
			tx.Rollback()
			t.Fatal(err)
		}
		if c.commit {
			err = tx.Commit()
		} else {
			err = tx.Rollback()
		}
		if err != nil {
			t.Fatal(err)
		}
		waitShotsDone(t, p)
		if c.n == 0 {
			select {
			case id := <-s.ran:
				t.Fatalf("%s: job %d started", c.name, id)
			default:
			}
			continue
		}
		waitRan(t, s.ran, c.n, c.name)
	}
	if n := s.warns.Count(slog.LevelWarn, ""); n != 0 {
		t.Errorf("the worker logged %d warnings: %q", n, s.warns.Lines(slog.LevelWarn))
	}
}

// waitShotsDone waits until q's announcer has no shot of
// requestAfterCommit pending and nothing in flight.
func waitShotsDone(t *testing.T, q *Queue) {
	t.Helper()
	waitUntil(t, 30*time.Second, "the announcements after the caller's commit", func() bool {
		a := q.announcer
		a.mu.Lock()
		defer a.mu.Unlock()
		for _, shot := range a.shots {
			if shot != nil {
				return false
			}
		}
		return !a.sending
	})
}

// TestMySQLWakeSkipsOwnWorkers: a queue's enqueues do not interrupt the
// waits of its own workers, which they wake directly; another queue's do,
// unless it goes through a transaction pooler (errBehindPooler: it sends
// no KILL QUERY, and the worker finds its jobs at its next poll).
func TestMySQLWakeSkipsOwnWorkers(t *testing.T) {
	t.Parallel()
	env := newTestEnv(t, engine.MySQL)
	q := env.queue(t, env.newPool(t), WithLogger(testdb.QuietLogger()))
	cfg := fastConfig()
	cfg.PollInterval = time.Minute
	cfg.MaintenanceInterval = -1
	w := q.NewWorker(cfg)
	ran := make(chan int64, 10)
	Handle(w, func(ctx context.Context, job *Job[emailArgs]) error { ran <- job.ID; return nil })
	startWorker(t, w)
	waiter := waiterSession(t, env)
	ctx := context.Background()
	pooledLog := &testdb.LogRecorder{}
	pooled := env.queue(t, nil, WithLogger(slog.New(pooledLog)), WithTransactionPooling(true))
	cases := []struct {
		name    string
		q       *Queue
		want    []int64
		wantErr error
	}{
		{"the worker's own queue", q, nil, nil},
		{"another queue", env.queue(t, nil, WithLogger(testdb.QuietLogger())), []int64{waiter}, nil},
		{"another queue behind a transaction pooler", pooled, nil, errBehindPooler},
	}
	for _, c := range cases {
		got, err := c.q.wakeOtherWorkers(ctx)
		if !errors.Is(err, c.wantErr) {
			t.Fatalf("%s: got error %v, want %v", c.name, err, c.wantErr)
		}
		if fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Errorf("%s interrupted the waits of %v, want %v", c.name, got, c.want)
		}
		waitUntil(t, 30*time.Second, "the worker to wait again", func() bool { return sessionStatement(t, env, waiter) == "WAIT" })
	}
	// Its own Enqueue still starts the job at once, and so does its own
	// EnqueueTx once committed (the shots after it wake this process's
	// workers directly).
	id := enqueue(t, q, emailArgs{})
	if got := waitFor(t, ran, wakeTimeout, "the job of the worker's own queue"); got != id {
		t.Errorf("ran job %d, want %d", got, id)
	}
	tx, err := env.db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	id, err = q.EnqueueTx(ctx, tx, emailArgs{})
	if err != nil {
		tx.Rollback()
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if got := waitFor(t, ran, wakeTimeout, "the job of the worker's own queue's EnqueueTx"); got != id {
		t.Errorf("ran job %d, want %d", got, id)
	}
	// The pooled queue's Enqueue meets errBehindPooler on its way out: its
	// announcer says so once, at info, having interrupted nothing (last:
	// the worker finds the job at its poll, or at any other wake-up).
	enqueue(t, pooled, emailArgs{})
	waitUntil(t, 30*time.Second, "the pooled queue's announcer to give up waking other processes", func() bool {
		return pooledLog.Count(slog.LevelInfo, "not waking the idle workers of other processes") == 1
	})
	if lines := strings.Join(pooledLog.Lines(slog.LevelInfo), "\n"); !strings.Contains(lines, "transaction pooler") {
		t.Errorf("the pooled queue logged %q, want the transaction pooler named", lines)
	}
}

// TestMySQLWaiterEndsWithRun: the waiting session ends with Run (its wait
// interrupted, not left waiting on the server) and gives its slot back; a
// worker with PollOnly, on a pool of fewer than waiterMinConns connections,
// or behind a transaction pooler, does not wait and still finds the jobs by
// polling; a Waker of the config still wakes a waiting worker.
func TestMySQLWaiterEndsWithRun(t *testing.T) {
	t.Parallel()
	t.Run("closed", func(t *testing.T) {
		t.Parallel()
		s := newWakeSetup(t, engine.MySQL, nil)
		waiter := waiterSession(t, s.env)
		if err := s.stop(10 * time.Second); err != nil {
			t.Fatal(err)
		}
		// Stop returned after the wait did: the session is gone or going,
		// not waiting out its 10 seconds.
		if st := sessionStatement(t, s.env, waiter); st == "WAIT" {
			t.Errorf("session %d still waits after Run returned", waiter)
		}
		waitUntil(t, 30*time.Second, fmt.Sprintf("session %d to end", waiter), func() bool {
			return len(waitingSessionsOf(t, s.env)) == 0
		})
	})
	t.Run("Waker too", func(t *testing.T) {
		t.Parallel()
		waker := &chanWaker{ch: make(chan struct{}, 1)}
		s := newWakeSetup(t, engine.MySQL, func(_ *testEnv, cfg *WorkerConfig) { cfg.Waker = waker })
		waiterSession(t, s.env)
		s.waitClaims(t, 2)
		s.env.exec(t, `INSERT INTO {t} (name, type, payload, status, attempts, max_attempts, base_delay, max_delay, scheduled_at, created_at)
			VALUES ('email', 'email', '{}', 'pending', 0, 3, 1, 1, UTC_TIMESTAMP() - INTERVAL 1 SECOND, UTC_TIMESTAMP())`)
		s.quiet(t, 300*time.Millisecond, "a row inserted by hand")
		waker.ch <- struct{}{}
		waitRan(t, s.ran, 1, "the config's Waker")
	})
	for _, c := range []struct {
		name   string
		setup  func(db *sql.DB, cfg *WorkerConfig)
		pooled bool // WithTransactionPooling(true): a proxy may share the session
	}{
		{"PollOnly", func(_ *sql.DB, cfg *WorkerConfig) { cfg.PollOnly = true }, false},
		{"one connection", func(db *sql.DB, _ *WorkerConfig) { db.SetMaxOpenConns(1) }, false},
		// The wait would hold both: the worker would have none left.
		{"two connections", func(db *sql.DB, _ *WorkerConfig) { db.SetMaxOpenConns(2) }, false},
		{"three connections", func(db *sql.DB, _ *WorkerConfig) { db.SetMaxOpenConns(waiterMinConns - 1) }, false},
		{"transaction pooler", func(*sql.DB, *WorkerConfig) {}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			env := newTestEnv(t, engine.MySQL)
			db := env.newPool(t)
			cfg := fastConfig()
			cfg.MaintenanceInterval = -1
			c.setup(db, &cfg)
			q := env.queue(t, db, WithLogger(testdb.QuietLogger()), WithTransactionPooling(c.pooled))
			w := q.NewWorker(cfg)
			ran := make(chan int64, 1)
			Handle(w, func(ctx context.Context, job *Job[emailArgs]) error { ran <- job.ID; return nil })
			startWorker(t, w)
			id := enqueue(t, env.queue(t, nil, WithLogger(testdb.QuietLogger())), emailArgs{})
			if got := waitFor(t, ran, wakeTimeout, "the job, found by polling"); got != id {
				t.Errorf("ran job %d, want %d", got, id)
			}
			if ids := waitingSessionsOf(t, env); len(ids) != 0 {
				t.Errorf("sessions %v hold wake slots, want none", ids)
			}
		})
	}
}

// TestMySQLWakeSlotsFull: with every wake slot of the table held, a worker
// warns once and polls (trying again for a slot meanwhile:
// TestMySQLWaiterTakesASlotFreedLater); the holder is listed once however
// many slots it holds.
func TestMySQLWakeSlotsFull(t *testing.T) {
	t.Parallel()
	env := newTestEnv(t, engine.MySQL)
	ctx := context.Background()
	conn, err := env.newPool(t).Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	gen := mysqlgen.New(conn)
	var holder int64
	for slot := range int64(wakeSlots) {
		r, err := gen.TakeWakeSlot(ctx, mysqlgen.TakeWakeSlotParams{TableName: env.tbl.Name, Slot: slot})
		if err != nil || r.Taken != 1 {
			t.Fatalf("taking slot %d: %+v, %v", slot, r, err)
		}
		holder = r.SessionID
	}
	if ids := waitingSessionsOf(t, env); len(ids) != 1 || ids[0] != holder {
		t.Fatalf("the sessions holding wake slots are %v, want %d once", ids, holder)
	}
	warns := &testdb.LogRecorder{}
	q := env.queue(t, env.newPool(t), WithLogger(slog.New(warns)))
	cfg := fastConfig()
	cfg.MaintenanceInterval = -1
	w := q.NewWorker(cfg)
	ran := make(chan int64, 1)
	Handle(w, func(ctx context.Context, job *Job[emailArgs]) error { ran <- job.ID; return nil })
	startWorker(t, w)
	waitUntil(t, 30*time.Second, "the worker's warning", func() bool { return warns.Count(slog.LevelWarn, "cannot go on waiting") == 1 })
	id := enqueue(t, env.queue(t, nil, WithLogger(testdb.QuietLogger())), emailArgs{})
	if got := waitFor(t, ran, wakeTimeout, "the job, found by polling"); got != id {
		t.Errorf("ran job %d, want %d", got, id)
	}
	if lines := warns.Lines(slog.LevelWarn); len(lines) != 1 || !strings.Contains(lines[0], "wake slots") {
		t.Errorf("warnings %q, want one about the wake slots", lines)
	}
}

// TestInterruptWait: interrupting a session that waits for a wake slot's
// bell ends its wait; one that is idle is no error, one that has ended is
// errWaiterGone. The
// wait ends with 1 when the bell's holder ends.
func TestInterruptWait(t *testing.T) {
	t.Parallel()
	env := newTestEnv(t, engine.MySQL)
	ctx := context.Background()
	pool := env.newPool(t)
	conn, err := pool.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	bell, err := pool.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer bell.Close()
	gen := mysqlgen.New(conn)
	r, err := gen.TakeWakeSlot(ctx, mysqlgen.TakeWakeSlotParams{TableName: env.tbl.Name, Slot: 7})
	if err != nil || r.Taken != 1 {
		t.Fatalf("TakeWakeSlot: %+v, %v", r, err)
	}
	id := r.SessionID
	key := mysqlgen.TakeWakeBellParams{TableName: env.tbl.Name, Slot: 7}
	if taken, err := mysqlgen.New(bell).TakeWakeBell(ctx, key); err != nil || taken != 1 {
		t.Fatalf("TakeWakeBell: %d, %v", taken, err)
	}
	if err := interruptWait(ctx, env.db, id); err != nil {
		t.Errorf("interrupting an idle session: %v", err)
	}
	type result struct {
		outcome int64
		err     error
	}
	wait := func() <-chan result {
		ch := make(chan result, 1)
		go func() {
			o, err := gen.WaitForEnqueues(ctx, mysqlgen.WaitForEnqueuesParams{TableName: key.TableName, Slot: key.Slot, Seconds: mysqlWaitSeconds})
			ch <- result{o, err}
		}()
		waitUntil(t, 30*time.Second, "the wait to start", func() bool { return sessionStatement(t, env, id) == "WAIT" })
		return ch
	}
	waited := wait()
	if err := interruptWait(ctx, env.db, id); err != nil {
		t.Fatalf("interrupting the wait: %v", err)
	}
	got := waitFor(t, waited, 30*time.Second, "the interrupted wait")
	if !(got.err == nil && got.outcome == -1) && !isMySQLError(got.err, mysqlQueryInterrupted) {
		t.Errorf("the interrupted wait returned %d, %v; want -1 (MySQL) or error %d (MariaDB)", got.outcome, got.err, mysqlQueryInterrupted)
	}
	waited = wait()
	discardConn(bell) // the bell's holder ends (closing its connection)
	if got := waitFor(t, waited, 30*time.Second, "the wait for a bell whose holder ended"); got.err != nil || got.outcome != 1 {
		t.Errorf("the wait returned %d, %v; want 1 (the bell taken)", got.outcome, got.err)
	}
	if err := interruptWait(ctx, env.db, 1<<40); !errors.Is(err, errWaiterGone) {
		t.Errorf("interrupting a session that does not exist: %v, want errWaiterGone", err)
	}
}

// TestSlotHolders: the holders are read once, kept, and read again after
// forget; a failed read is not kept, an empty list only for its shorter
// time.
func TestSlotHolders(t *testing.T) {
	h := slotHolders{emptyTTL: time.Nanosecond} // an empty list is read again
	reads := 0
	fail, empty := false, false
	read := func(context.Context) ([]int64, error) {
		reads++
		if fail {
			return nil, errors.New("down")
		}
		if empty {
			return []int64{}, nil
		}
		return []int64{int64(reads)}, nil
	}
	ctx := context.Background()
	for _, c := range []struct {
		name      string
		forget    bool
		fail      bool
		empty     bool
		want      string
		wantReads int
		wantErr   bool
	}{
		{name: "first", want: "[1]", wantReads: 1},
		{name: "kept", want: "[1]", wantReads: 1},
		{name: "forgotten, read fails", forget: true, fail: true, wantReads: 2, wantErr: true},
		{name: "read again", want: "[3]", wantReads: 3},
		{name: "kept again", want: "[3]", wantReads: 3},
		{name: "none waits", forget: true, empty: true, want: "[]", wantReads: 4},
		{name: "an empty list is read again", empty: true, want: "[]", wantReads: 5},
		{name: "a worker waits", want: "[6]", wantReads: 6},
		{name: "kept once more", want: "[6]", wantReads: 6},
	} {
		if c.forget {
			h.forget()
		}
		fail, empty = c.fail, c.empty
		before := reads
		ids, fresh, err := h.get(ctx, read)
		if (err != nil) != c.wantErr || (err == nil && fmt.Sprint(ids) != c.want) || reads != c.wantReads {
			t.Errorf("%s: %v, %v after %d reads; want %s (error %v) after %d", c.name, ids, err, reads, c.want, c.wantErr, c.wantReads)
		}
		if fresh != (reads > before) {
			t.Errorf("%s: get reported fresh %v after %d reads (%d before)", c.name, fresh, reads, before)
		}
	}
}

// bellHolder returns the session that holds the bell of a wake slot of
// env's table, or 0.
func bellHolder(t *testing.T, env *testEnv) int64 {
	t.Helper()
	var id sql.NullInt64
	err := env.db.QueryRow(`WITH RECURSIVE slots (n) AS (SELECT 0 UNION ALL SELECT n + 1 FROM slots WHERE n < 63)
		SELECT MAX(IS_USED_LOCK(CONCAT('jobqueue bell ', SHA1(CONCAT(DATABASE(), '.', ?)), ' ', n))) FROM slots`,
		env.tbl.Name).Scan(&id)
	if err != nil {
		t.Fatalf("reading the bells' holders: %v", err)
	}
	return id.Int64
}

// TestMySQLWaiterReconnects: when the waiting session, or the one that
// holds its bell, ends, the worker warns, waits again on new sessions
// (claiming once, for what it may have missed) and is woken by the
// enqueues of other pools again, also of one that kept the old session in
// its list of holders.
func TestMySQLWaiterReconnects(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name   string
		victim func(t *testing.T, env *testEnv, waiter int64) int64
	}{
		{"the waiting session", func(_ *testing.T, _ *testEnv, waiter int64) int64 { return waiter }},
		{"the bell's session", func(t *testing.T, env *testEnv, _ int64) int64 { return bellHolder(t, env) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s := newWakeSetup(t, engine.MySQL, nil)
			// The producer keeps the holders it reads: its next Enqueue
			// finds the old waiter gone and must read them again.
			s.producer.holders.ttl = time.Hour
			waiter := waiterSession(t, s.env)
			s.waitClaims(t, 2)
			if _, err := s.producer.Enqueue(context.Background(), emailArgs{}, Type("email")); err != nil {
				t.Fatal(err)
			}
			waitRan(t, s.ran, 1, "an Enqueue before the session ended")
			victim := c.victim(t, s.env, waiter)
			if victim == 0 {
				t.Fatal("no session to end")
			}
			if _, err := s.env.db.Exec(fmt.Sprintf("KILL CONNECTION %d", victim)); err != nil {
				t.Fatal(err)
			}
			var again int64
			waitUntil(t, 10*time.Second, "a new session waiting on a wake slot", func() bool {
				ids := waitingSessionsOf(t, s.env)
				if len(ids) != 1 || ids[0] == waiter {
					return false
				}
				again = ids[0]
				return sessionStatement(t, s.env, again) == "WAIT" && bellHolder(t, s.env) != 0
			})
			if s.warns.Count(slog.LevelWarn, "waiting for the enqueues of other processes failed") == 0 {
				t.Errorf("no warning about the ended session: %q", s.warns.Lines(slog.LevelWarn))
			}
			// The claim once the new wait began, then idle.
			waitUntil(t, 30*time.Second, "the worker to be idle", func() bool { return !mysqlClaimRunning(t, s.env) })
			if _, err := s.producer.Enqueue(context.Background(), emailArgs{}, Type("email")); err != nil {
				t.Fatal(err)
			}
			waitRan(t, s.ran, 1, "an Enqueue after the new wait began")
		})
	}
}

// TestMySQLWakeBetweenWaits: an enqueue whose interruption reaches the
// waiting session between two of its waits (after one ran out, before the
// next began), where the server forgets it, still starts its job at once:
// the worker claims once the next wait has begun. Before, the job waited
// for the worker's next poll (here an hour). The enqueue and its KILL
// QUERY are made by hand in the waiter itself between the waits (the
// test's betweenWaits), so the interruption is lost every time.
func TestMySQLWakeBetweenWaits(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	env := newTestEnv(t, engine.MySQL)
	q := env.queue(t, env.newPool(t), WithLogger(testdb.QuietLogger()))
	q.mysqlWaitSeconds = 1
	var session atomic.Int64 // the waiting session, once the test knows it
	lost := make(chan error, 1)
	q.betweenWaits = func(outcome int64) {
		id := session.Load()
		if outcome != 0 || id == 0 {
			return
		}
		session.Store(0)
		_, err := env.db.ExecContext(ctx, env.sql(`INSERT INTO {t} (name, type, payload, status, attempts, max_attempts, base_delay, max_delay, scheduled_at, created_at)
			VALUES ('email', 'email', '{}', 'pending', 0, 3, 1, 1, UTC_TIMESTAMP() - INTERVAL 1 SECOND, UTC_TIMESTAMP())`))
		if err == nil {
			err = interruptWait(ctx, env.db, id)
		}
		lost <- err
	}
	cfg := fastConfig()
	cfg.Types = []string{"email"}
	cfg.PollInterval = time.Hour
	cfg.MaintenanceInterval = -1
	w := q.NewWorker(cfg)
	ran := make(chan int64, 1)
	Handle(w, func(ctx context.Context, job *Job[emailArgs]) error { ran <- job.ID; return nil })
	startWorker(t, w)
	session.Store(waiterSession(t, env))
	if err := <-lost; err != nil {
		t.Fatalf("enqueuing between two waits: %v", err)
	}
	waitFor(t, ran, wakeTimeout, "the job enqueued between two waits")
}
