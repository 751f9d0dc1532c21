package queue

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/testdb"
)

// planNotices collects the plans auto_explain sends to the client (as
// NOTICEs) on the connections of a pool opened by openExplained.
type planNotices struct {
	mu    sync.Mutex
	plans []string
}

func (p *planNotices) add(_ *pgconn.PgConn, n *pgconn.Notice) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.plans = append(p.plans, n.Message)
}

// take returns the plans collected since the last take, and forgets them.
func (p *planNotices) take() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	plans := p.plans
	p.plans = nil
	return plans
}

// TestListPlannedForItsFilter: every ListJobs run on PostgreSQL is planned
// for its own filter. The statement reads `(@type IS NULL OR type = @type)`;
// prepared and cached by pgx, after five runs PostgreSQL may settle on a
// generic plan (here: after five runs filtered on a rare kind, whose plans
// read the whole table, the generic plan looks cheaper), planned for no
// value of the filters, which reads the primary key backwards and filters
// every row; a rare type's page then reads the whole table instead of the
// type index. The plans are auto_explain's, on the queue's one connection.
func TestListPlannedForItsFilter(t *testing.T) {
	ctx := context.Background()
	env := coreEnv(t, engine.Postgres)
	// 20 000 jobs of 4 common types and 8 kinds; 10 of type rare, 4 of
	// kind rare_kind.
	if _, err := env.db.ExecContext(ctx, `INSERT INTO `+env.tbl.Quoted()+`
		(name, type, payload, status, attempts, max_attempts, base_delay, max_delay, scheduled_at, created_at)
		SELECT CASE WHEN g % 5000 = 7 THEN 'rare_kind' ELSE 'kind_' || (g % 8) END,
		       CASE WHEN g % 2000 = 3 THEN 'rare' ELSE (ARRAY['email','images','reports','webhooks'])[g % 4 + 1] END,
		       '{}', CASE WHEN g % 100 < 90 THEN 'completed' WHEN g % 100 < 95 THEN 'failed' ELSE 'pending' END,
		       1, 3, 60, 3600, TIMESTAMP '2026-01-01' + g * INTERVAL '1 ms', TIMESTAMP '2026-01-01'
		FROM generate_series(1, 20000) g`); err != nil {
		t.Fatal(err)
	}
	if _, err := env.db.ExecContext(ctx, `ANALYZE `+env.tbl.Quoted()); err != nil {
		t.Fatal(err)
	}

	cfg, err := pgx.ParseConfig(env.url)
	if err != nil {
		t.Fatal(err)
	}
	var notices planNotices
	cfg.OnNotice = notices.add
	db := stdlib.OpenDB(*cfg, stdlib.OptionAfterConnect(func(ctx context.Context, c *pgx.Conn) error {
		_, err := c.Exec(ctx, `LOAD 'auto_explain';
			SET auto_explain.log_min_duration = 0;
			SET auto_explain.log_level = 'notice';
			SET client_min_messages = 'notice'`)
		return err
	}))
	t.Cleanup(func() {
		if err := db.Close(); err != nil {
			t.Error(err)
		}
	})
	db.SetMaxOpenConns(1) // every list on the one connection, its statements cached there
	q := env.queue(t, db, WithLogger(testdb.QuietLogger()))

	// listPlan lists with f and returns the plan of its ListJobs.
	listPlan := func(f ListFilter, want int) string {
		t.Helper()
		notices.take()
		rows, err := q.List(ctx, f)
		if err != nil || len(rows) != want {
			t.Fatalf("List(%+v) = %d rows, %v; want %d", f, len(rows), err, want)
		}
		var found []string
		for _, p := range notices.take() {
			if strings.Contains(p, "ListJobs") {
				found = append(found, p)
			}
		}
		if len(found) != 1 {
			t.Fatalf("List(%+v): %d plans of ListJobs in auto_explain's notices; want 1: %q", f, len(found), found)
		}
		return found[0]
	}
	for range 5 {
		listPlan(ListFilter{Name: "rare_kind"}, 4)
	}
	for i := range 10 {
		for _, c := range []struct {
			f    ListFilter
			want int
		}{
			{ListFilter{Type: "rare"}, 10},
			{ListFilter{Type: "rare", Status: StatusCompleted}, 10},
		} {
			plan := listPlan(c.f, c.want)
			// The type index (its name is cut to 63 bytes) with the type
			// as its condition, not the primary key with the type filtered.
			if !strings.Contains(plan, "Index Cond: (((type)::text = 'rare'::text)") || strings.Contains(plan, "_pkey") {
				t.Fatalf("run %d of List(%+v) did not read the type index:\n%s", i+1, c.f, plan)
			}
		}
	}
}
