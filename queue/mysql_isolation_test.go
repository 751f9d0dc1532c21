package queue

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/testdb"
)

// The MySQL tests of the queue's transaction isolation: claims and the
// maintenance run at READ COMMITTED whatever the session's level.
//
// None of them reads information_schema.INNODB_TRX: InnoDB refills that
// view (and INNODB_LOCKS, INNODB_LOCK_WAITS) only when nobody on the server
// has read it for 100 ms (trx0i_s.cc, can_cache_be_updated), so a session
// that polls it, or any other session's reads, keep it showing the
// transactions of an earlier read: a transaction begun since may be missing
// ("no rows") and a lock wait may never show.

// mysqlProbeTable creates the table `<env's table>_<suffix>` (n INT) on
// env's MySQL database, for a test to count the rows another session
// commits; it is dropped when t ends.
func mysqlProbeTable(t *testing.T, env *testEnv, suffix string) string {
	t.Helper()
	probe := "`" + env.table + "_" + suffix + "`"
	if _, err := env.db.ExecContext(context.Background(), "CREATE TABLE "+probe+" (n INT NOT NULL)"); err != nil {
		t.Fatalf("creating the probe table %s: %v", probe, err)
	}
	t.Cleanup(func() {
		if _, err := env.db.ExecContext(context.Background(), "DROP TABLE "+probe); err != nil {
			t.Errorf("dropping %s: %v", probe, err)
		}
	})
	return probe
}

// mysqlLevelVar is the session variable of the isolation level on db's
// server: tx_isolation on MariaDB before 11.1, transaction_isolation on
// MySQL 8 (and on MariaDB from 11.1).
func mysqlLevelVar(t *testing.T, db *sql.DB) string {
	t.Helper()
	var level string
	if err := db.QueryRowContext(context.Background(), "SELECT @@tx_isolation").Scan(&level); err == nil {
		return "tx_isolation"
	}
	if err := db.QueryRowContext(context.Background(), "SELECT @@transaction_isolation").Scan(&level); err != nil {
		t.Fatalf("reading the session's isolation level (neither tx_isolation nor transaction_isolation): %v", err)
	}
	return "transaction_isolation"
}

// countAroundCommit counts probe's rows in tx, commits a row to it on
// other, and counts again in tx: after is before+1 at READ COMMITTED, and
// before at REPEATABLE READ (the transaction's snapshot hides the row).
func countAroundCommit(ctx context.Context, tx sqlRunner, other *sql.DB, probe string) (before, after int, err error) {
	if err := tx.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+probe).Scan(&before); err != nil {
		return 0, 0, err
	}
	if _, err := other.ExecContext(ctx, "INSERT INTO "+probe+" (n) VALUES (1)"); err != nil {
		return 0, 0, err
	}
	if err := tx.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+probe).Scan(&after); err != nil {
		return 0, 0, err
	}
	return before, after, nil
}

// TestMySQLClaimsReadCommitted: a claim runs at READ COMMITTED on a
// connection whose session level is REPEATABLE READ, and leaves the
// session's level alone. The level is observed by what it does: inside the
// claim's transaction a row committed by another session after the
// transaction's first read is seen by the next read (at REPEATABLE READ the
// transaction's snapshot would hide it).
func TestMySQLClaimsReadCommitted(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	env := coreEnv(t, engine.MySQL)
	probe := mysqlProbeTable(t, env, "rc")
	db := env.newPool(t)
	db.SetMaxOpenConns(1)
	if _, err := db.ExecContext(ctx, "SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ"); err != nil {
		t.Fatal(err)
	}
	var seen []string
	var hookErr error
	hook := func(query string, tx sqlRunner) {
		if tx == nil || !strings.Contains(query, "CONCAT(") || hookErr != nil {
			return
		}
		// Inside the claim's transaction, after its locking SELECT: read,
		// let another session commit a row, read again.
		var before, after int
		if before, after, hookErr = countAroundCommit(ctx, tx, env.db, probe); hookErr != nil {
			return
		}
		seen = append(seen, fmt.Sprintf("%d->%d", before, after))
	}
	q := env.queue(t, db, WithLogger(testdb.QuietLogger()), withStatementHook(hook))
	mustEnqueue(t, q, testArgs{N: 1})
	mustEnqueue(t, q, testArgs{N: 2})
	for i := 0; i < 2; i++ {
		if jobs := mustClaim(t, q, nil, 1, time.Minute); len(jobs) != 1 {
			t.Fatalf("claim %d: %d jobs", i, len(jobs))
		}
	}
	if hookErr != nil {
		t.Fatal(hookErr)
	}
	if fmt.Sprint(seen) != "[0->1 1->2]" {
		t.Fatalf("inside the claims' transactions, reads around another session's commit counted %v; want [0->1 1->2] (READ COMMITTED: each read sees the latest commits)", seen)
	}
	var session string
	if err := db.QueryRowContext(ctx, "SELECT @@"+mysqlLevelVar(t, db)).Scan(&session); err != nil {
		t.Fatal(err)
	}
	if session != "REPEATABLE-READ" {
		t.Fatalf("the session's level became %s", session)
	}
}

// TestMySQLBinlogStatementIsExplained: under binlog_format=STATEMENT with
// the binary log on, MySQL refuses writes at READ COMMITTED; the claim's
// error says what to do. MariaDB with the binary log off (log_bin=0, as on
// the test server) ignores binlog_format, and claims work.
func TestMySQLBinlogStatementIsExplained(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	env := coreEnv(t, engine.MySQL)
	db := env.newPool(t)
	db.SetMaxOpenConns(1)
	if _, err := db.ExecContext(ctx, "SET SESSION binlog_format = 'STATEMENT'"); err != nil {
		t.Fatalf("setting the session's binlog_format: %v", err)
	}
	var logBin int
	if err := db.QueryRowContext(ctx, "SELECT @@log_bin").Scan(&logBin); err != nil {
		t.Fatal(err)
	}
	q := env.queue(t, db, WithLogger(testdb.QuietLogger()))
	mustEnqueue(t, q, testArgs{N: 1})
	jobs, err := q.claim(ctx, nil, 1, time.Minute)
	if logBin == 1 {
		if err == nil || !strings.Contains(err.Error(), "binlog_format=ROW") {
			t.Fatalf("claim under binlog_format=STATEMENT = %v, %v; want an explained error", jobs, err)
		}
	} else if err != nil || len(jobs) != 1 {
		t.Fatalf("binary log off: claim = %v, %v; want the job", jobs, err)
	}
	// The explanation, for the server's own error.
	raw := &mysql.MySQLError{Number: 1665, Message: "Cannot execute statement: impossible to write to binary log since BINLOG_FORMAT = STATEMENT and at least one table uses a storage engine limited to row-based logging."}
	got := explainMySQLClaim(fmt.Errorf("exec: %w", raw))
	var me *mysql.MySQLError
	if !strings.Contains(got.Error(), "binlog_format=ROW") || !strings.Contains(got.Error(), "SET GLOBAL binlog_format") || !errors.As(got, &me) {
		t.Fatalf("explained error %q", got)
	}
	if other := explainMySQLClaim(&mysql.MySQLError{Number: 1213, Message: "Deadlock"}); strings.Contains(other.Error(), "binlog") {
		t.Fatalf("a deadlock was explained as binlog: %v", other)
	}
}

// TestMySQLMaintenanceDoesNotBlockEnqueues: ExpireOverdue, Reclaim and
// Prune scan ranges of an index. At REPEATABLE READ (MySQL's default
// session level) such a scan takes gap locks, and ExpireOverdue's cover the
// place where every new job without a deadline goes: enqueues waited for the
// statement, and a statement that waits (here on a row another transaction
// holds) made them fail with a lock wait timeout. The queue runs these
// statements at READ COMMITTED whatever the session's level, as it does
// claims.
func TestMySQLMaintenanceDoesNotBlockEnqueues(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	env := coreEnv(t, engine.MySQL)
	rr := env.newPool(t)
	rr.SetMaxOpenConns(1)
	if _, err := rr.ExecContext(ctx, "SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ"); err != nil {
		t.Fatal(err)
	}
	q, clock := coreQueue(t, env)
	mustEnqueue(t, q, testArgs{N: 1}, ExpiresIn(time.Minute))
	last := mustEnqueue(t, q, testArgs{N: 2}, ExpiresIn(2*time.Minute))
	clock.add(3 * time.Minute)
	maint := env.queue(t, rr, withClock(clock.now), WithLogger(testdb.QuietLogger()))

	// Another transaction holds the overdue job with the latest deadline,
	// so that ExpireOverdue waits on it with its range scan half done.
	locker := env.newPool(t)
	tx, err := locker.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, env.sql("SELECT id FROM {t} WHERE id = ? FOR UPDATE"), last); err != nil {
		t.Fatal(err)
	}
	expired := make(chan error, 1)
	go func() {
		n, err := maint.ExpireOverdue(ctx)
		if err == nil && n != 2 {
			err = fmt.Errorf("expired %d jobs, want 2", n)
		}
		expired <- err
	}()
	waitUntil(t, 30*time.Second, "ExpireOverdue to wait for the held row", func() bool {
		if len(expired) > 0 {
			t.Fatalf("ExpireOverdue returned (%v) without waiting for the row another transaction holds", <-expired)
		}
		n, err := mysqlLockWaits(ctx, env.db, env.table)
		if err != nil {
			t.Fatalf("reading the InnoDB monitor: %v", err)
		}
		return n > 0
	})

	// A producer whose lock waits end after a second enqueues a job
	// without a deadline meanwhile.
	prod := env.newPool(t)
	prod.SetMaxOpenConns(1)
	if _, err := prod.ExecContext(ctx, "SET SESSION innodb_lock_wait_timeout = 1"); err != nil {
		t.Fatal(err)
	}
	pq := env.queue(t, prod, WithLogger(testdb.QuietLogger()))
	start := time.Now()
	if _, err := pq.Enqueue(ctx, testArgs{N: 3}); err != nil {
		t.Errorf("an enqueue during ExpireOverdue failed after %v: %v", time.Since(start), err)
	}
	if n, err := mysqlLockWaits(ctx, env.db, env.table); err != nil || n != 1 {
		t.Errorf("after the enqueue, %d transactions wait for a lock of the table (%v); want ExpireOverdue's, still waiting", n, err)
	}
	tx.Rollback()
	if err := waitFor(t, expired, 10*time.Second, "ExpireOverdue"); err != nil {
		t.Fatal(err)
	}
}

// mysqlLockWaits counts the transactions that wait for a lock on table, from
// the InnoDB monitor (SHOW ENGINE INNODB STATUS, which InnoDB writes afresh
// for each read; see above for why not INNODB_TRX). Each transaction there
// is a block that starts with "---TRANSACTION "; a waiting one says
// "LOCK WAIT", then its statement and the lock it waits for, both naming
// the table.
func mysqlLockWaits(ctx context.Context, db *sql.DB, table string) (int, error) {
	var typ, name, status string
	if err := db.QueryRowContext(ctx, "SHOW ENGINE INNODB STATUS").Scan(&typ, &name, &status); err != nil {
		return 0, err
	}
	_, trxs, ok := strings.Cut(status, "\nTRANSACTIONS\n")
	if !ok {
		return 0, fmt.Errorf("the InnoDB monitor has no TRANSACTIONS section:\n%s", status)
	}
	trxs, _, _ = strings.Cut(trxs, "\nFILE I/O\n")
	n := 0
	for _, trx := range strings.Split(trxs, "---TRANSACTION ")[1:] {
		if strings.Contains(trx, "LOCK WAIT") && strings.Contains(trx, table) {
			n++
		}
	}
	return n, nil
}
