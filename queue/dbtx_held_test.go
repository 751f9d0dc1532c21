package queue

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/jobqueue/jobqueue/db/mysqlgen"
	"github.com/jobqueue/jobqueue/internal/engine"
)

// TestHeldConnPrepareFails: a statement on a held connection (a claim
// session's) runs prepared there. When its PREPARE fails, the statement
// fails with that error and is not sent unprepared instead: on Galera the
// PREPARE can be the command that hears of a brute-force abort of the
// session's transaction, and the statement sent unprepared would then run
// outside that transaction (TestGalera once caught 140 jobs run twice so).
// A statement the server cannot prepare (ER_UNSUPPORTED_PS) runs
// unprepared. Exec, Query and QueryRow alike; whether the statement ran is
// the session's own count of the statements it ran (Com_update,
// Com_select), read on the same connection.
func TestHeldConnPrepareFails(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	env := coreEnv(t, engine.MySQL)
	q, err := New(env.db, WithTable(env.table))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { q.Close() })

	refused := errors.New("the PREPARE was refused (test)")
	unsupported := &mysql.MySQLError{Number: mysqlUnsupportedPS, Message: "This command is not supported in the prepared statement protocol yet"}
	statements := []struct {
		name    string
		counter string // the session status variable the statement counts in
		run     func(qs *mysqlgen.Queries) error
	}{
		{"Exec", "Com_update", func(qs *mysqlgen.Queries) error {
			_, err := qs.ExtendLeases(ctx, mysqlgen.ExtendLeasesParams{
				LeaseUntil: sql.NullTime{Time: time.Now(), Valid: true},
				Ids:        []uint64{1}, Tokens: []sql.NullString{{String: "no such token", Valid: true}},
			})
			return err
		}},
		{"Query", "Com_select", func(qs *mysqlgen.Queries) error {
			_, err := qs.SelectDueJobs(ctx, mysqlgen.SelectDueJobsParams{Now: time.Now(), Limit: 1})
			return err
		}},
		{"QueryRow", "Com_select", func(qs *mysqlgen.Queries) error {
			_, err := qs.SelectClaimFrontier(ctx)
			if errors.Is(err, sql.ErrNoRows) {
				return nil // it ran: the table is empty
			}
			return err
		}},
	}
	for _, tc := range []struct {
		name       string
		prepareErr error // nil: prepared by the server
		wantErr    error
		wantRan    bool
	}{
		{name: "prepared", wantRan: true},
		{name: "PREPARE fails", prepareErr: refused, wantErr: refused, wantRan: false},
		{name: "the server cannot prepare it", prepareErr: unsupported, wantRan: true},
	} {
		for _, st := range statements {
			t.Run(tc.name+"/"+st.name, func(t *testing.T) {
				conn := ownConn(t, env.db)
				prepares := 0
				stmts := &connStmts{prepare: func(ctx context.Context, conn *sql.Conn, text string) (*sql.Stmt, error) {
					prepares++
					if tc.prepareErr != nil {
						return nil, tc.prepareErr
					}
					return conn.PrepareContext(ctx, text)
				}}
				defer stmts.close()
				before := sessionCounter(t, conn, st.counter)
				err := st.run(mysqlgen.New(q.run.onHeld(conn, stmts)))
				ran := sessionCounter(t, conn, st.counter) - before
				switch {
				case tc.wantErr == nil && err != nil:
					t.Fatalf("the statement failed: %v", err)
				case tc.wantErr != nil && !errors.Is(err, tc.wantErr):
					t.Fatalf("the statement's error is %v; want the PREPARE's, %v", err, tc.wantErr)
				}
				if prepares != 1 {
					t.Errorf("PREPARE tried %d times; want 1", prepares)
				}
				if want := map[bool]int64{true: 1, false: 0}[tc.wantRan]; ran != want {
					t.Errorf("the session ran the statement %d times; want %d", ran, want)
				}
			})
		}
	}
}

// sessionCounter reads a session status variable of conn's session (a
// count of the statements it ran), unprepared.
func sessionCounter(t *testing.T, conn *sql.Conn, name string) int64 {
	t.Helper()
	n, err := mysqlSessionStatus(context.Background(), conn, name)
	if err != nil {
		t.Fatalf("reading %s: %v", name, err)
	}
	return n
}

// mysqlSessionStatus reads the session status variable name (SHOW SESSION
// STATUS, unprepared) of the session on.
func mysqlSessionStatus(ctx context.Context, on sqlRunner, name string) (int64, error) {
	var got string
	var n int64
	err := on.QueryRowContext(ctx, "SHOW SESSION STATUS LIKE '"+name+"'").Scan(&got, &n)
	return n, err
}
