package migrations

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/testdb"
	"github.com/jobqueue/jobqueue/queue"
)

// keyArgs is a job of TestInstallRefusesLeftoverKeyRows.
type keyArgs struct{ N int }

func (keyArgs) Kind() string { return "key" }

// TestInstallRefusesLeftoverKeyRows: when a jobs table was dropped by hand,
// its <table>_unique keeps the key rows of its jobs; a new table of that
// name restarts its ids, so a new job (never given a key) would hold the
// old job's key and a keyed enqueue of that key would be refused as a
// duplicate. Install refuses to create the table beside such rows, saying
// to uninstall; after Uninstall (which drops the leftovers) it installs,
// and the key is free.
func TestInstallRefusesLeftoverKeyRows(t *testing.T) {
	t.Parallel()
	testdb.ForEachEngine(t, func(t *testing.T, e *testdb.Env) {
		ctx := context.Background()
		name := e.Table(t)
		tb := tableOf(t, e.Kind, name)
		if err := Install(ctx, e.DB, name); err != nil {
			t.Fatal(err)
		}
		enqueue := func(key string) error {
			t.Helper()
			q, err := queue.New(e.DB, queue.WithTable(name))
			if err != nil {
				t.Fatal(err)
			}
			defer func() {
				if err := q.Close(); err != nil {
					t.Error(err)
				}
			}()
			var opts []queue.EnqueueOption
			if key != "" {
				opts = append(opts, queue.UniqueKey(key))
			}
			_, err = q.Enqueue(ctx, keyArgs{N: 1}, opts...)
			return err
		}
		if err := enqueue("K"); err != nil {
			t.Fatal(err)
		}
		if _, err := e.DB.ExecContext(ctx, "DROP TABLE "+tb.Quoted()); err != nil {
			t.Fatal(err)
		}

		err := Install(ctx, e.DB, name)
		if !errors.Is(err, ErrSideNameTaken) {
			t.Fatalf("Install beside %s_unique's leftover rows = %v; want an error wrapping ErrSideNameTaken", name, err)
		}
		for _, s := range []string{name + "_unique", "dropped by hand", "jobqueue uninstall --table " + name} {
			if !strings.Contains(err.Error(), s) {
				t.Errorf("error %q does not mention %q", err, s)
			}
		}
		if st, err := inspect(ctx, e.DB, tb); err != nil || st != tableMissing {
			t.Fatalf("after the refusal table %s is %v (%v); want it missing", name, st, err)
		}

		if err := Uninstall(ctx, e.DB, name); err != nil {
			t.Fatalf("Uninstall of the leftovers: %v", err)
		}
		if err := Install(ctx, e.DB, name); err != nil {
			t.Fatalf("Install after Uninstall: %v", err)
		}
		if err := enqueue(""); err != nil {
			t.Fatal(err)
		}
		if err := enqueue("K"); err != nil {
			t.Fatalf("keyed enqueue of the dropped table's key on the new table: %v", err)
		}
	})
}

// TestInstallBesideEmptyLeftovers: side tables left empty by a table
// dropped by hand (the leader's rows name no job) do not stop Install.
func TestInstallBesideEmptyLeftovers(t *testing.T) {
	t.Parallel()
	testdb.ForEachEngine(t, func(t *testing.T, e *testdb.Env) {
		ctx := context.Background()
		name := e.Table(t)
		tb := tableOf(t, e.Kind, name)
		if err := Install(ctx, e.DB, name); err != nil {
			t.Fatal(err)
		}
		leader := engine.Table{Kind: e.Kind, Name: name + "_leader"}
		if _, err := e.DB.ExecContext(ctx, "INSERT INTO "+leader.Quoted()+" (name, holder, term, renewals, since, renewed_at, lease_until) VALUES ('maintenance', 'h', 1, 0, '2026-01-01 00:00:00', '2026-01-01 00:00:00', '2026-01-01 00:00:00')"); err != nil {
			t.Fatal(err)
		}
		if _, err := e.DB.ExecContext(ctx, "DROP TABLE "+tb.Quoted()); err != nil {
			t.Fatal(err)
		}
		if err := Install(ctx, e.DB, name); err != nil {
			t.Fatalf("Install beside an empty %s_unique: %v", name, err)
		}
	})
}
