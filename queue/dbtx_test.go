package queue

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/testdb"
)

// TestTwoTablesInOneDatabase runs every generated query the queue has
// against two differently named tables of one database: what is written
// into one never shows in the other, and each numbers its jobs itself.
func TestTwoTablesInOneDatabase(t *testing.T) {
	forEachEngine(t, func(t *testing.T, kind engine.Kind) {
		ctx := context.Background()
		env := coreEnv(t, kind)
		other := testdb.Table(t, env.db)
		if err := installTable(ctx, env, other); err != nil {
			t.Fatal(err)
		}
		qa, clock := coreQueue(t, env)
		qb, err := New(env.db, WithTable(other), withClock(clock.now), WithLogger(testdb.QuietLogger()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := qb.Close(); err != nil {
				t.Errorf("closing the queue: %v", err)
			}
		})
		if qa.Table() == qb.Table() || qb.Engine() != string(kind) {
			t.Fatalf("tables %s and %s, engine %s", qa.Table(), qb.Table(), qb.Engine())
		}
		// Table b's ids start past 10 (10 jobs enqueued and purged), table
		// a's at 1: no id of one table is an id of the other, so that an
		// operation that reached the wrong table would find a job there.
		dummies := make([]JobArgs, 10)
		for i := range dummies {
			dummies[i] = testArgs{N: 1000 + i}
		}
		if n, err := qb.EnqueueMany(ctx, dummies); err != nil || n != len(dummies) {
			t.Fatalf("EnqueueMany on b = %d, %v; want %d", n, err, len(dummies))
		}
		if n, err := qb.Purge(ctx); err != nil || n != int64(len(dummies)) {
			t.Fatalf("Purge on b = %d, %v; want %d", n, err, len(dummies))
		}
		// Table a: 3 jobs; table b: 1 job.
		a1 := mustEnqueue(t, qa, testArgs{N: 1})
		if n, err := qa.EnqueueMany(ctx, []JobArgs{testArgs{N: 2}, testArgs{N: 3}}); err != nil || n != 2 {
			t.Fatalf("EnqueueMany on a = %d, %v; want 2", n, err)
		}
		b1 := mustEnqueue(t, qb, testArgs{N: 100}, Type("b"))
		if a1 != 1 || b1 <= a1+2 {
			t.Fatalf("ids: a's first %d, b's %d; want a's from 1 (its own sequence, untouched by b's 10 jobs) and b's past a's 3", a1, b1)
		}
		if row, err := qa.Get(ctx, b1); !errors.Is(err, ErrJobNotFound) {
			t.Fatalf("Get of b's job %d on a = %+v, %v; want ErrJobNotFound", b1, row, err)
		}
		if row, err := qb.Get(ctx, a1); !errors.Is(err, ErrJobNotFound) {
			t.Fatalf("Get of a's job %d on b = %+v, %v; want ErrJobNotFound", a1, row, err)
		}
		count := func(q *Queue) map[Status]int64 {
			s, err := q.Stats(ctx, "")
			if err != nil {
				t.Fatal(err)
			}
			return s
		}
		if sa, sb := count(qa), count(qb); sa[StatusPending] != 3 || sb[StatusPending] != 1 {
			t.Fatalf("stats a %v, b %v", sa, sb)
		}
		// Claims on b see only b's job.
		jb := mustClaim(t, qb, nil, 10, time.Minute)
		if len(jb) != 1 || jb[0].Type != "b" || jb[0].ID != b1 {
			t.Fatalf("claim on b: %+v", jb)
		}
		// Completing b's attempt through a's queue finds nothing there.
		if stale, err := qa.complete(ctx, []attemptRef{jb[0].ref()}); err != nil || len(stale) != 1 {
			t.Fatalf("complete of b's attempt on a: stale %v, %v", stale, err)
		}
		if lost, err := qa.heartbeat(ctx, []attemptRef{jb[0].ref()}, time.Minute); err != nil || len(lost) != 1 {
			t.Fatalf("heartbeat of b's attempt on a: lost %v, %v", lost, err)
		}
		if stale, err := qb.complete(ctx, []attemptRef{jb[0].ref()}); err != nil || len(stale) != 0 {
			t.Fatalf("complete on b: stale %v, %v", stale, err)
		}
		ja := mustClaim(t, qa, nil, 10, time.Minute)
		if len(ja) != 3 {
			t.Fatalf("claim on a: %d jobs", len(ja))
		}
		if _, _, err := qa.fail(ctx, ja[0], Permanent(fmt.Errorf("x"))); err != nil {
			t.Fatal(err)
		}
		rows, err := qb.List(ctx, ListFilter{})
		if err != nil {
			t.Fatalf("List on b: %v", err)
		}
		if len(rows) != 1 || rows[0].ID != b1 || rows[0].Type != "b" {
			t.Fatalf("List on b: %v, want [%d]", ids(rows), b1)
		}
		rows, err = qa.List(ctx, ListFilter{Type: "b"})
		if err != nil {
			t.Fatalf("List on a: %v", err)
		}
		if len(rows) != 0 {
			t.Fatalf("List on a shows b's type: %v", ids(rows))
		}
		clock.add(time.Hour)
		if n, err := qb.Reclaim(ctx); err != nil || n != 0 {
			t.Fatalf("Reclaim on b = %d, %v; want 0 (a's attempts are not b's)", n, err)
		}
		if n, err := qa.Reclaim(ctx); err != nil || n != 2 {
			t.Fatalf("Reclaim on a = %d, %v; want 2", n, err)
		}
		// a's failed job is not in b: Retry on b finds nothing and a's job
		// stays failed.
		if ok, err := qb.Retry(ctx, ja[0].ID); err != nil || ok {
			t.Fatalf("Retry on b of a's failed job %d = %v, %v; want false", ja[0].ID, ok, err)
		}
		if row := getJob(t, qa, ja[0].ID); row == nil || row.Status != StatusFailed {
			t.Fatalf("a's failed job after Retry on b: %+v; want it failed", row)
		}
		if n, err := qb.Prune(ctx, 0); err != nil || n != 1 {
			t.Fatalf("Prune on b = %d, %v; want 1", n, err)
		}
		if sa := count(qa); sa[StatusPending] != 2 || sa[StatusFailed] != 1 {
			t.Fatalf("a after b's prune: %v", sa)
		}
		if n, err := qb.Purge(ctx); err != nil || n != 0 {
			t.Fatalf("Purge on an empty b = %d, %v; want 0", n, err)
		}
		if sa := count(qa); sa[StatusPending] != 2 || sa[StatusFailed] != 1 {
			t.Fatalf("a after b's purge: %v", sa)
		}
	})
}

// TestTimesAreUTCWhateverTheZone runs the time checks (timesUTCInTokyo)
// in a child process of the test binary, this test again, whose TZ is
// Asia/Tokyo (time.Local cannot be changed safely in a running test
// binary); on MySQL the child's sessions also use +09:00.
func TestTimesAreUTCWhateverTheZone(t *testing.T) {
	if os.Getenv("JOBQUEUE_TZ_CHILD") == "1" {
		timesUTCInTokyo(t)
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestTimesAreUTCWhateverTheZone$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), "TZ=Asia/Tokyo", "JOBQUEUE_TZ_CHILD=1")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: TestTimesAreUTCWhateverTheZone") {
		t.Fatalf("child with TZ=Asia/Tokyo: %v\n%s", err, out)
	}
	for _, k := range testdb.Kinds() {
		if !strings.Contains(string(out), "--- PASS: TestTimesAreUTCWhateverTheZone/"+string(k)) && testdb.Required() {
			t.Fatalf("the child did not pass on %s:\n%s", k, out)
		}
	}
}

// timesUTCInTokyo is the child's part of TestTimesAreUTCWhateverTheZone.
func timesUTCInTokyo(t *testing.T) {
	if _, off := time.Now().Zone(); off != 9*3600 {
		t.Fatalf("TZ is not Asia/Tokyo here (offset %d)", off)
	}
	forEachEngine(t, func(t *testing.T, kind engine.Kind) {
		ctx := context.Background()
		env := coreEnv(t, kind)
		db := env.db
		if kind == engine.MySQL {
			// A pool whose sessions run at +09:00 and whose driver reads
			// times in Local (Tokyo), as a service's own DSN might.
			_, dsn, _, err := engine.DriverDSN(env.url)
			if err != nil {
				t.Fatal(err)
			}
			dsn = strings.Replace(dsn, "loc=UTC", "loc=Local", 1) + "&time_zone=%27%2B09%3A00%27"
			db = openMySQLDSN(t, dsn)
			var tz string
			if err := db.QueryRowContext(ctx, "SELECT @@session.time_zone").Scan(&tz); err != nil || tz != "+09:00" {
				t.Fatalf("session time_zone %q, %v", tz, err)
			}
		}
		if kind == engine.Postgres {
			if _, err := db.ExecContext(ctx, "SET TIME ZONE 'Asia/Tokyo'"); err != nil {
				t.Fatal(err)
			}
		}
		// The real clock: the queue's default, time.Now().UTC().
		q, err := New(db, WithTable(env.table), WithLogger(testdb.QuietLogger()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := q.Close(); err != nil {
				t.Errorf("closing the queue: %v", err)
			}
		})
		tokyo := time.FixedZone("JST", 9*3600)
		at := time.Date(2030, 6, 1, 9, 30, 0, 0, tokyo) // 00:30 UTC
		before := time.Now().Add(-time.Second)
		id := mustEnqueue(t, q, testArgs{N: 1}, At(at), ExpiresAt(at.Add(time.Hour)))
		j := getJob(t, q, id)
		if !j.ScheduledAt.Equal(at) || j.ScheduledAt.Location() != time.UTC || j.ScheduledAt.Hour() != 0 {
			t.Fatalf("scheduled_at read back as %v, want %v in UTC", j.ScheduledAt, at.UTC())
		}
		if !j.ExpiresAt.Equal(at.Add(time.Hour)) || j.ExpiresAt.Location() != time.UTC {
			t.Fatalf("expires_at read back as %v", j.ExpiresAt)
		}
		if j.CreatedAt.Location() != time.UTC || j.CreatedAt.Before(before.Truncate(time.Second)) || j.CreatedAt.After(time.Now().Add(time.Second)) {
			t.Fatalf("created_at %v is not now in UTC (now %v)", j.CreatedAt, time.Now().UTC())
		}
		// The table holds the UTC wall clock.
		var stored string
		query := map[engine.Kind]string{
			engine.Postgres: "SELECT to_char(scheduled_at, 'YYYY-MM-DD HH24:MI:SS') FROM {t} WHERE id = ?",
			engine.MySQL:    "SELECT DATE_FORMAT(scheduled_at, '%Y-%m-%d %H:%i:%s') FROM {t} WHERE id = ?",
			engine.SQLite:   "SELECT substr(scheduled_at, 1, 19) FROM {t} WHERE id = ?",
		}[kind]
		if err := env.db.QueryRowContext(ctx, env.sql(query), id).Scan(&stored); err != nil {
			t.Fatal(err)
		}
		if stored != "2030-06-01 00:30:00" {
			t.Fatalf("the table holds %q, want the UTC wall clock 2030-06-01 00:30:00", stored)
		}
		// A job due now in UTC is claimed now (not 9 hours off either way).
		due := mustEnqueue(t, q, testArgs{N: 2}, Type("now"))
		if kind == engine.SQLite {
			// The SQLite watcher's probe compares times as the claim does.
			mustEnqueue(t, q, testArgs{N: 3}, Type("in an hour"), Delay(time.Hour))
			if !dueJobExists(t, q, "now") || dueJobExists(t, q, "in an hour") {
				t.Fatalf("DueJobExists: the job due now is due %v, the one in an hour %v", dueJobExists(t, q, "now"), dueJobExists(t, q, "in an hour"))
			}
		}
		claimFrom := time.Now()
		jobs := mustClaim(t, q, []string{"now"}, 1, time.Minute)
		claimTo := time.Now()
		if len(jobs) != 1 || jobs[0].ID != due {
			t.Fatalf("a job due now was not claimed: %v", ids(jobs))
		}
		// A minute from the claim's now, which lies between claimFrom and
		// claimTo (MySQL keeps whole seconds: up to a second less), however
		// long the claim took on a busy machine.
		if lu := *jobs[0].LeaseUntil; lu.Before(claimFrom.Add(time.Minute-time.Second)) || lu.After(claimTo.Add(time.Minute+time.Second)) {
			t.Fatalf("lease ends at %v, %v after the claim began, want a minute after the claim's now", lu, lu.Sub(claimFrom))
		}
		if n, err := q.Reclaim(ctx); err != nil || n != 0 {
			t.Fatalf("Reclaim took a fresh lease: %d, %v", n, err)
		}
	})
}
