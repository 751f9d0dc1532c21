package main

import (
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/jobqueue/jobqueue/internal/testdb"
)

// TestBenchModes runs bench's other modes on every engine: the drain by
// several worker processes (--processes) and the enqueue by goroutines of
// single enqueues (--enqueuers). Every job must complete exactly once.
func TestBenchModes(t *testing.T) {
	t.Parallel()
	modes := []struct {
		name string
		args []string
	}{
		{"processes", []string{"--processes", "3", "--workers", "2"}},
		{"enqueuers", []string{"--enqueuers", "4", "--workers", "4"}},
		{"both", []string{"--enqueuers", "3", "--processes", "2", "--workers", "3"}},
	}
	testdb.ForEachEngine(t, func(t *testing.T, e *testdb.Env) {
		for _, m := range modes {
			t.Run(m.name, func(t *testing.T) {
				c := envCLI(t, e)
				c.timeout = 2 * time.Minute
				out := c.ok(t, append([]string{"bench", "--jobs", "250", "--latency-jobs", "10"}, m.args...)...)
				var res benchResult
				decodeJSON(t, out, &res)
				if res.Completed != 260 || res.Duplicates != 0 {
					t.Errorf("completed %d duplicates %d, want 260 and 0", res.Completed, res.Duplicates)
				}
				if res.EnqueueJobsPerS <= 0 || res.DrainJobsPerS <= 0 || res.LatencyP50Ms <= 0 {
					t.Errorf("implausible measures: %+v", res)
				}
				assertStats(t, c, "", map[string]int64{"completed": 260})
			})
		}
	})
}

// TestBenchModesBadInput: a --processes or --enqueuers out of range is a
// usage error naming the range, found before anything runs.
func TestBenchModesBadInput(t *testing.T) {
	t.Parallel()
	c := cli{db: "sqlite:" + t.TempDir() + "/x.db"}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--processes", "0"}, "--processes 0 is out of range; use 1 to 64"},
		{[]string{"--processes", "-2"}, "--processes -2 is out of range; use 1 to 64"},
		{[]string{"--processes", "65"}, "--processes 65 is out of range; use 1 to 64"},
		{[]string{"--enqueuers", "-1"}, "--enqueuers -1 is out of range; use 0 to 1000"},
		{[]string{"--enqueuers", "1001"}, "--enqueuers 1001 is out of range; use 0 to 1000"},
	} {
		t.Run(strings.Join(tc.args, "="), func(t *testing.T) {
			r := c.run(t, append([]string{"bench", "--jobs", "10", "--workers", "1"}, tc.args...)...)
			assertOneLineError(t, r, 2, tc.want)
		})
	}
}

// TestBenchChildProcs: bench --processes gives each worker process its share
// of the cores (at least one), unless the user set GOMAXPROCS, which the
// children then inherit.
func TestBenchChildProcs(t *testing.T) {
	cpus := runtime.NumCPU()
	cases := []struct {
		name     string
		env      string
		n        int
		want     int
		override bool
	}{
		{"one process gets every core", "", 1, cpus, true},
		{"a share each", "", 2, max(1, cpus/2), true},
		{"more processes than cores: one each", "", 4 * cpus, 1, true},
		{"the user's GOMAXPROCS is left alone", "3", 4, 0, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("GOMAXPROCS", tc.env)
			got, ok := childProcs(tc.n)
			if got != tc.want || ok != tc.override {
				t.Errorf("childProcs(%d) with GOMAXPROCS=%q = %d, %v; want %d, %v", tc.n, tc.env, got, ok, tc.want, tc.override)
			}
		})
	}
}
