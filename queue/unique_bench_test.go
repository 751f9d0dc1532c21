package queue

// BenchmarkEnqueueUnique compares, per engine, one Enqueue of a job with a
// fresh unique key (the side-table row and its constraint check on top)
// with one plain Enqueue. Each iteration does one of each, alternately, so
// that a load that comes and goes on the machine weighs on both alike; it
// reports the median time of each (robust to the pauses of a shared
// machine) and their ratio (the README gives it).
//
//	go test -run '^$' -bench EnqueueUnique -benchtime 2000x ./queue/

import (
	"context"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/jobqueue/jobqueue/internal/testdb"
)

func BenchmarkEnqueueUnique(b *testing.B) {
	for _, kind := range testdb.Kinds() {
		b.Run(string(kind), func(b *testing.B) {
			env := newTestEnv(b, kind)
			q := env.queue(b, nil, WithLogger(testdb.QuietLogger()))
			ctx := context.Background()
			var plain, unique []time.Duration
			i := 0
			for b.Loop() {
				// Alternate which goes first, too.
				for k := range 2 {
					keyed := (i+k)%2 == 0
					var opts []EnqueueOption
					if keyed {
						opts = []EnqueueOption{UniqueKey("bench:" + strconv.Itoa(i))}
					}
					start := time.Now()
					if _, err := q.Enqueue(ctx, seqArgs{N: i}, opts...); err != nil {
						b.Fatal(err)
					}
					if keyed {
						unique = append(unique, time.Since(start))
					} else {
						plain = append(plain, time.Since(start))
					}
				}
				i++
			}
			p, u := median(plain), median(unique)
			b.ReportMetric(float64(p)/1e3, "plain-µs")
			b.ReportMetric(float64(u)/1e3, "unique-µs")
			b.ReportMetric(float64(u)/float64(p), "unique/plain")
		})
	}
}

// median is the middle of ds (which it sorts).
func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	return ds[len(ds)/2]
}
