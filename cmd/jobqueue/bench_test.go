package main

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jobqueue/jobqueue/internal/testdb"
)

// TestBench runs a small bench on every engine: one JSON line with exactly
// the SPEC's keys, every job completed once; a second run empties the table
// of the first run's jobs by itself, but refuses a table holding other jobs
// unless --force.
func TestBench(t *testing.T) {
	t.Parallel()
	testdb.ForEachEngine(t, func(t *testing.T, e *testdb.Env) {
		c := envCLI(t, e)
		c.timeout = 2 * time.Minute
		args := []string{"bench", "--jobs", "300", "--workers", "4", "--latency-jobs", "20"}
		out := c.ok(t, args...)
		if strings.Count(out, "\n") != 1 {
			t.Fatalf("bench printed more than one line:\n%s", out)
		}
		var raw map[string]json.RawMessage
		decodeJSON(t, out, &raw)
		var keys []string
		for key := range raw {
			keys = append(keys, key)
		}
		slices.Sort(keys)
		want := []string{"completed", "drain_jobs_per_s", "duplicates", "engine", "enqueue_jobs_per_s", "jobs",
			"latency_p50_ms", "latency_p99_ms", "system", "workers"}
		if !reflect.DeepEqual(keys, want) {
			t.Fatalf("keys %v, want %v", keys, want)
		}
		if !strings.HasPrefix(out, `{"system":"jobqueue","engine":"`+string(e.Kind)+`","jobs":300,"workers":4,`) {
			t.Errorf("bench line does not start as the SPEC says: %s", out)
		}
		var res benchResult
		decodeJSON(t, out, &res)
		if res.Completed != 320 || res.Duplicates != 0 {
			t.Errorf("completed %d duplicates %d, want 320 and 0", res.Completed, res.Duplicates)
		}
		if res.EnqueueJobsPerS <= 0 || res.DrainJobsPerS <= 0 || res.LatencyP50Ms <= 0 || res.LatencyP99Ms < res.LatencyP50Ms {
			t.Errorf("implausible measures: %+v", res)
		}
		assertStats(t, c, "", map[string]int64{"completed": 320})

		// The table holds only the first bench's jobs: a second bench
		// drops and recreates it by itself (SPEC section 6: a fresh
		// table, so its ids start again from 1, which deleting the rows
		// would not do).
		out = c.ok(t, args...)
		decodeJSON(t, out, &res)
		if res.Completed != 320 || res.Duplicates != 0 {
			t.Errorf("second run: completed %d duplicates %d, want 320 and 0", res.Completed, res.Duplicates)
		}
		var first map[string]any
		decodeJSON(t, c.ok(t, "show", "1", "--json"), &first)
		if first["name"] != "bench_noop" || first["status"] != "completed" {
			t.Errorf("after the second run, job 1 is %v, want the second run's first no-op job (a fresh table)", first)
		}
		// Another job in the table: bench refuses it unless --force, and
		// deletes nothing.
		c.ok(t, "enqueue", "--name", "precious")
		assertOneLineError(t, c.run(t, args...), exitFailure, "holds 321 jobs", "1 of them not from an earlier bench", "--force", "--table")
		assertStats(t, c, "", map[string]int64{"pending": 1, "completed": 320})
		out = c.ok(t, append(args, "--force")...)
		decodeJSON(t, out, &res)
		if res.Completed != 320 || res.Duplicates != 0 {
			t.Errorf("with --force: completed %d duplicates %d, want 320 and 0", res.Completed, res.Duplicates)
		}
		assertStats(t, c, "", map[string]int64{"completed": 320})
	})
}
