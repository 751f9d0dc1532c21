package testdb

import (
	"os"
	"strconv"
	"testing"
)

// BenchJobs is the number of jobs a drain benchmark drains per iteration:
// $JOBQUEUE_BENCH_JOBS, else 20000. A value that is not a positive number
// fails the benchmark.
func BenchJobs(b testing.TB) int {
	b.Helper()
	if s := os.Getenv("JOBQUEUE_BENCH_JOBS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n <= 0 {
			b.Fatalf("JOBQUEUE_BENCH_JOBS=%q is not a positive number; set it to the jobs to drain, or unset it for 20000", s)
		}
		return n
	}
	return 20000
}
