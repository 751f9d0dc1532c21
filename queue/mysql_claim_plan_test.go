package queue

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/jobqueue/jobqueue/db/mysqlgen"
	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/testdb"
)

// TestMySQLClaimPlanFromWatermark: on a table of 6 000 analyzed jobs, the
// claim's locking SELECT of every type, as the adapter sends it (the
// generated text rewritten for the table, the time arguments as
// whole-second strings: runner.text and runner.args, with the parameters
// mysqlStore.claimIn gives), is a range scan of status_scheduled over
// status, scheduled_at and id: past a claimer's watermark it starts there,
// never reads the table whole nor from the start of the pending jobs.
// SelectDueJobs' comment names what breaks it (a time.Time argument with
// nanoseconds: ref access on status). The claims of one type and of
// several types are not asserted: MariaDB reads them by ref on (type,
// status) of type_status_scheduled, the watermark an index condition, and
// for several types past a watermark by ref on status of status_scheduled.
func TestMySQLClaimPlanFromWatermark(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	env := newTestEnv(t, engine.MySQL)
	q := env.queue(t, nil, WithLogger(testdb.QuietLogger()))
	enqueueSeq(t, q, 3000, Type("a"))
	enqueueSeq(t, q, 3000, Type("b"))
	env.exec(t, "ANALYZE TABLE {t}")
	now := q.now()
	alive := nullTime(&now)
	for _, c := range []struct {
		name  string
		types []string
		index string
		query func(qs *mysqlgen.Queries, after claimPos) error
	}{
		{"every type", nil, "idx_status_scheduled", func(qs *mysqlgen.Queries, after claimPos) error {
			_, err := qs.SelectDueJobs(ctx, mysqlgen.SelectDueJobsParams{
				Now: now, AfterAt: after.at, AfterID: uint64(after.id), DeadlineAfter: alive, Limit: 8})
			return err
		}},
	} {
		// A claimer's watermark, after the jobs its first claim took.
		cur := &claimCursor{q: q, types: c.types, lease: time.Minute}
		if rows, err := cur.claim(ctx, 100); err != nil || len(rows) != 100 || !cur.set {
			t.Fatalf("%s: claim = %d rows, %v; want 100 and a watermark", c.name, len(rows), err)
		}
		for _, after := range []struct {
			name string
			pos  claimPos
		}{{"watermark", cur.pos}, {"start", claimPos{}}} {
			t.Run(c.name+"/"+after.name, func(t *testing.T) {
				var rec queryRecorder
				if err := c.query(mysqlgen.New(&rec), after.pos); !errors.Is(err, errRecorded) {
					t.Fatalf("recording the query: %v", err)
				}
				text, err := q.run.text(rec.query)
				if err != nil {
					t.Fatal(err)
				}
				var plan string
				if err := env.db.QueryRowContext(ctx, "EXPLAIN FORMAT=JSON "+text, q.run.args(rec.args)...).Scan(&plan); err != nil {
					t.Fatalf("EXPLAIN: %v", err)
				}
				tbl, err := explainedTable(plan, env.tbl.Name)
				if err != nil {
					t.Fatalf("%v in the plan:\n%s", err, plan)
				}
				var parts []string
				if err := json.Unmarshal(tbl["used_key_parts"], &parts); err != nil {
					t.Fatalf("used_key_parts: %v in the plan:\n%s", err, plan)
				}
				var access, key string
				if json.Unmarshal(tbl["access_type"], &access) != nil || json.Unmarshal(tbl["key"], &key) != nil ||
					access != "range" || key != c.index || !slices.Contains(parts, "scheduled_at") || !slices.Contains(parts, "id") {
					t.Errorf("the claim reads %s by %s on key parts %v, want a range of %s on status, scheduled_at and id:\n%s",
						env.tbl.Name, access, parts, c.index, plan)
				}
			})
		}
	}
}

// explainedTable finds the table named name in the JSON plan of EXPLAIN
// FORMAT=JSON (MariaDB and MySQL nest it differently) and returns its
// fields.
func explainedTable(plan, name string) (map[string]json.RawMessage, error) {
	var root any
	if err := json.Unmarshal([]byte(plan), &root); err != nil {
		return nil, err
	}
	var found map[string]any
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			if v["table_name"] == name && found == nil {
				found = v
				return
			}
			for _, e := range v {
				walk(e)
			}
		case []any:
			for _, e := range v {
				walk(e)
			}
		}
	}
	walk(root)
	if found == nil {
		return nil, errors.New("no access to the table " + name)
	}
	out := map[string]json.RawMessage{}
	for k, v := range found {
		b, err := json.Marshal(v)
		if err != nil {
			return nil, err
		}
		out[k] = b
	}
	return out, nil
}
