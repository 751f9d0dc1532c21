package queue

// BenchmarkEnqueueUnique compares, per engine, one Enqueue of a job with a
// fresh unique key (plus the side-table row and its constraint check) with
// one plain Enqueue; the README gives the ratio.
//
//	go test -run '^$' -bench EnqueueUnique ./queue/

import (
	"context"
	"strconv"
	"testing"

	"github.com/jobqueue/jobqueue/internal/testdb"
)

func BenchmarkEnqueueUnique(b *testing.B) {
	for _, kind := range testdb.Kinds {
		for _, mode := range []string{"plain", "unique"} {
			b.Run(string(kind)+"/"+mode, func(b *testing.B) {
				env := newTestEnv(b, kind)
				q := env.queue(b, nil, WithLogger(quietLogger()))
				ctx := context.Background()
				i := 0
				for b.Loop() {
					var opts []EnqueueOption
					if mode == "unique" {
						opts = []EnqueueOption{UniqueKey("bench:" + strconv.Itoa(i))}
					}
					if _, err := q.Enqueue(ctx, seqArgs{N: i}, opts...); err != nil {
						b.Fatal(err)
					}
					i++
				}
				b.ReportMetric(float64(i)/b.Elapsed().Seconds(), "jobs/s")
			})
		}
	}
}
