//go:build unix

package main

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/testdb"
	"github.com/jobqueue/jobqueue/internal/testwait"
)

// TestWebReclaimCounted: the attempt of a worker that died (its row
// in_progress, its lease passed), ended by the dashboard's reclaim action,
// is counted in the /metrics `jobqueue web` serves, as a worker's
// maintenance counts the attempts it reclaims:
// jobqueue_jobs_worked_total{…,outcome="lost",type="email"} 1. Before,
// the web's queue had no telemetry and the series never appeared.
func TestWebReclaimCounted(t *testing.T) {
	t.Parallel()
	e := testdb.New(t, engine.SQLite)
	c := envCLI(t, e)
	c.ok(t, "install")
	c.ok(t, "enqueue", "--name", "hello", "--type", "email")
	tbl, err := engine.ParseTable(e.Kind, c.table)
	if err != nil {
		t.Fatal(err)
	}
	// As a worker killed during the attempt leaves it: claimed, the lease
	// (the enqueue's time) run out.
	if _, err := e.DB.ExecContext(context.Background(), "UPDATE "+tbl.Quoted()+
		" SET status = 'in_progress', attempts = attempts + 1, claim_token = 'crashed', lease_until = scheduled_at"); err != nil {
		t.Fatal(err)
	}
	base, _ := startWeb(t, c, nil, "--addr", "127.0.0.1:0")
	const series = `jobqueue_jobs_worked_total{messaging_destination_name="email",messaging_operation_name="work",messaging_system="jobqueue",outcome="lost",type="email"}`
	var got map[string]float64
	testwait.Until(t, 20*time.Second, 50*time.Millisecond, func() bool {
		if code := httpDo(t, "POST", base+"/api/maintenance/reclaim", "{}"); code != http.StatusOK {
			t.Fatalf("POST /api/maintenance/reclaim = %d, want 200", code)
		}
		var code int
		got, code = scrape(t, base+"/metrics")
		return code == http.StatusOK && got[series] > 0
	}, func() string { return fmt.Sprintf("/metrics has no %s after the dashboard's reclaim: %v", series, got) })
	if got[series] != 1 {
		t.Errorf("%s = %v, want 1 (one attempt reclaimed)", series, got[series])
	}
}
