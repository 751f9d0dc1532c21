package queue

import (
	"context"
	"testing"

	"github.com/jobqueue/jobqueue/internal/engine"
)

// refuseRows makes the env's table refuse, by a trigger, every write of
// event (INSERT or UPDATE) whose new row meets cond (an SQL condition on
// NEW, the same on every engine) while its control table says so (on at
// first): a database that fails some of the queue's writes for a while, on
// every engine. It returns the statement that turns the refusal off; the
// trigger and the control table go when t ends.
func refuseRows(t *testing.T, env *testEnv, event, cond string) (off string) {
	t.Helper()
	ctl := installRefusal(t, env, event, cond, true)
	return env.sql("UPDATE " + ctl + " SET refuse = 0")
}

// installRefusal installs refuseRows's trigger and its control table, the
// refusal on or off at first, and returns the control table's quoted name
// (its one row's column refuse: 1 on, 0 off).
func installRefusal(t *testing.T, env *testEnv, event, cond string, on bool) (ctl string) {
	t.Helper()
	quoted := func(suffix string) string {
		tbl, err := engine.ParseTable(env.kind, env.table+suffix)
		if err != nil {
			t.Fatal(err)
		}
		return tbl.Quoted()
	}
	ctl = quoted("_ctl")
	trg, fn := quoted("_trg"), quoted("_fn")
	const msg = "write refused by the test"
	when := cond + " AND (SELECT refuse FROM " + ctl + ") = 1"
	var ddl, drop []string
	switch env.kind {
	case engine.Postgres:
		ddl = []string{
			"CREATE FUNCTION " + fn + "() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN IF " + when + " THEN RAISE EXCEPTION '" + msg + "'; END IF; RETURN NEW; END $$",
			"CREATE TRIGGER " + trg + " BEFORE " + event + " ON {t} FOR EACH ROW EXECUTE FUNCTION " + fn + "()",
		}
		drop = []string{"DROP TRIGGER IF EXISTS " + trg + " ON {t}", "DROP FUNCTION IF EXISTS " + fn + "()"}
	case engine.MySQL:
		ddl = []string{
			"CREATE TRIGGER " + trg + " BEFORE " + event + " ON {t} FOR EACH ROW BEGIN IF " + when + " THEN SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = '" + msg + "'; END IF; END",
		}
		drop = []string{"DROP TRIGGER IF EXISTS " + trg}
	case engine.SQLite:
		ddl = []string{
			"CREATE TRIGGER " + trg + " BEFORE " + event + " ON {t} FOR EACH ROW WHEN " + when + " BEGIN SELECT RAISE(ABORT, '" + msg + "'); END",
		}
		drop = []string{"DROP TRIGGER IF EXISTS " + trg}
	default:
		t.Fatalf("no refusal for engine %s", env.kind)
	}
	first := "0"
	if on {
		first = "1"
	}
	ddl = append([]string{"CREATE TABLE " + ctl + " (refuse INT NOT NULL)", "INSERT INTO " + ctl + " VALUES (" + first + ")"}, ddl...)
	drop = append(drop, "DROP TABLE IF EXISTS "+ctl)
	t.Cleanup(func() {
		for _, q := range drop {
			if _, err := env.db.ExecContext(context.Background(), env.sql(q)); err != nil {
				t.Errorf("%s: %v", q, err)
			}
		}
	})
	for _, q := range ddl {
		env.exec(t, q)
	}
	return ctl
}
