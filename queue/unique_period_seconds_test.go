package queue

import (
	"testing"
	"time"

	"github.com/jobqueue/jobqueue/internal/engine"
)

// TestUniqueForWholeSeconds: a UniqueFor period keeps the key at least d
// after the enqueue on every engine, also when the enqueue is not on a
// whole second. MySQL's DATETIME keeps whole seconds (MariaDB truncates
// the fraction, MySQL rounds it), so there the period ended up to a
// second before d was over, while PostgreSQL and SQLite kept the key
// until then: an enqueue 300 ms before the end made a second job on
// MariaDB only.
func TestUniqueForWholeSeconds(t *testing.T) {
	forEachEngine(t, func(t *testing.T, kind engine.Kind) {
		env := coreEnv(t, kind)
		q, clock := coreQueue(t, env)
		clock.add(600 * time.Millisecond) // the enqueue is at .6 s
		cases := []struct {
			name   string
			period time.Duration
		}{
			{"an hour", time.Hour},
			{"under a second", 300 * time.Millisecond},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				key := "period " + c.name
				holder := newKeyed(t, q, key, Type("w"), UniqueFor(c.period))
				completeJob(t, q, "w")
				clock.add(c.period - 300*time.Millisecond)
				wantDup(t, q, key, holder)
				clock.add(time.Second + 300*time.Millisecond) // past the end, rounded up to a second
				wantNew(t, q, key, holder)
				completeJob(t, q, DefaultType)
			})
		}
	})
}
