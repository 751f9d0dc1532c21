package queue

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/jobqueue/jobqueue/db/pggen"
	"github.com/jobqueue/jobqueue/internal/engine"
)

// TestQueryRecorderRow records a generated :one query (InsertJob, whose
// method scans the row QueryRowContext answers) with and without the
// runner's shared row: both keep the query and its arguments and answer
// errRecorded, and the shared row keeps answering so when several
// goroutines record at once.
func TestQueryRecorderRow(t *testing.T) {
	r := newRunner(nil, engine.Table{Kind: engine.Postgres, Name: "jobs"})
	at := time.Date(2026, 12, 6, 22, 0, 0, 0, time.UTC)
	params := func(n int) pggen.InsertJobParams {
		return pggen.InsertJobParams{Name: "job", Type: "t", Payload: json.RawMessage(`{}`), MaxAttempts: int32(n), ScheduledAt: at, CreatedAt: at}
	}
	for _, c := range []struct {
		name string
		row  bool
	}{{"a row per call", false}, {"the runner's shared row", true}} {
		t.Run(c.name, func(t *testing.T) {
			const goroutines = 8
			var wg sync.WaitGroup
			errs := make([]error, goroutines)
			recs := make([]queryRecorder, goroutines)
			for i := range goroutines {
				if c.row {
					recs[i].row = r.recorded
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					_, errs[i] = pggen.New(&recs[i]).InsertJob(context.Background(), params(i+1))
				}()
			}
			wg.Wait()
			for i := range goroutines {
				if !errors.Is(errs[i], errRecorded) {
					t.Errorf("recording %d: err = %v, want errRecorded", i, errs[i])
				}
				if recs[i].query == "" {
					t.Errorf("recording %d kept no query", i)
				}
				if got, want := recs[i].args[3], any(int32(i+1)); !cmp.Equal(got, want) {
					t.Errorf("recording %d: max_attempts argument = %v, want %v (args %v)", i, got, want, recs[i].args)
				}
			}
		})
	}
}

// BenchmarkQueryRecorderRow is the cost of recording a :one query, with a
// row made per call (failedRow) and with the runner's shared row.
func BenchmarkQueryRecorderRow(b *testing.B) {
	r := newRunner(nil, engine.Table{Kind: engine.Postgres, Name: "jobs"})
	p := pggen.InsertJobParams{Name: "job", Type: "t", Payload: json.RawMessage(`{}`), MaxAttempts: 3}
	for _, shared := range []bool{false, true} {
		name := "per-call"
		if shared {
			name = "shared"
		}
		b.Run(name, func(b *testing.B) {
			for range b.N {
				rec := queryRecorder{}
				if shared {
					rec.row = r.recorded
				}
				if _, err := pggen.New(&rec).InsertJob(context.Background(), p); !errors.Is(err, errRecorded) {
					b.Fatal(err)
				}
			}
		})
	}
}
