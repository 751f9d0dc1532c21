package queue

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"runtime/pprof"
	"strings"
	"testing"
	"time"

	"github.com/jobqueue/jobqueue/internal/testdb"
	"github.com/jobqueue/jobqueue/internal/testwait"
)

// queueGoroutines lists the goroutines running code of package queue,
// other than test goroutines (those under testing.tRunner).
func queueGoroutines(t *testing.T) []string {
	t.Helper()
	var buf bytes.Buffer
	if err := pprof.Lookup("goroutine").WriteTo(&buf, 2); err != nil {
		t.Fatalf("listing the goroutines: %v", err)
	}
	var out []string
	for _, g := range strings.Split(buf.String(), "\n\n") {
		if strings.Contains(g, "jobqueue/queue.") && !strings.Contains(g, "testing.tRunner") {
			out = append(out, g)
		}
	}
	return out
}

// TestWorkerLeavesNoGoroutines runs a worker through completions, failures
// and an unknown kind on every engine and checks that once Run has returned
// no goroutine of the package is left. It does not run in parallel, so
// that other tests' workers are not counted.
func TestWorkerLeavesNoGoroutines(t *testing.T) {
	for _, kind := range testdb.Kinds() {
		t.Run(string(kind), func(t *testing.T) {
			env := newTestEnv(t, kind)
			q := env.queue(t, nil, WithLogger(testdb.QuietLogger()))
			w := q.NewWorker(fastConfig())
			Handle(w, func(ctx context.Context, job *Job[emailArgs]) error {
				if job.Args.Retries%2 == 1 {
					return errors.New("odd")
				}
				return nil
			})
			const jobs = 20
			for i := range jobs - 1 {
				enqueue(t, q, emailArgs{To: "x", Retries: i})
			}
			enqueue(t, q, otherArgs{N: 1})
			stop, _ := startWorker(t, w)
			waitUntil(t, 20*time.Second, "every job to have run once", func() bool {
				return env.countWhere(t, "attempts >= 1 AND status <> 'in_progress'") == jobs
			})
			if len(queueGoroutines(t)) == 0 {
				t.Fatal("the check sees no goroutine of the worker while Run runs; it could not find a leak")
			}
			if err := stop(10 * time.Second); err != nil {
				t.Fatalf("Run: %v", err)
			}
			var left []string
			testwait.Until(t, 30*time.Second, 20*time.Millisecond, func() bool {
				left = queueGoroutines(t)
				return len(left) == 0
			}, func() string {
				return fmt.Sprintf("%d goroutines of package queue still run after Run returned:\n%s", len(left), strings.Join(left, "\n\n"))
			})
		})
	}
}
