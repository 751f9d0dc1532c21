package queue

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jobqueue/jobqueue/internal/engine"
)

// TestKeyedViewRecheckAfterClockSteps: a queue on SQLite that found its
// table without the view <table>_keyed (installed by an older version)
// looks for it again keyedViewRecheck later, once Install may have added
// it. The wait was measured on the wall clock, so after a step back (NTP
// correcting a clock that ran ahead) it lasted as long as the step too,
// and keyed enqueues took the slower transaction meanwhile.
func TestKeyedViewRecheckAfterClockSteps(t *testing.T) {
	cases := []struct {
		name    string
		step    time.Duration // of the wall clock after the view was found missing
		recheck bool
	}{
		{"no step", 0, false},
		{"half the wait", keyedViewRecheck / 2, false},
		{"the wait", keyedViewRecheck, true},
		{"back 1h", -time.Hour, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			env := newTestEnv(t, engine.SQLite)
			clock := &testClock{}
			q := env.queue(t, nil, withClock(clock.now))
			env.exec(t, fmt.Sprintf(`DROP VIEW "%s_keyed"`, env.table))
			if _, err := q.Enqueue(ctx, emailArgs{To: "a"}, UniqueKey("a")); err != nil {
				t.Fatal(err)
			}
			if q.keyedView.missingSince.Load() == 0 {
				t.Fatal("the queue did not notice the missing view")
			}
			installTestTable(t, env.db, env.table) // adds the view again
			clock.advance(tc.step)
			if _, err := q.Enqueue(ctx, emailArgs{To: "b"}, UniqueKey("b")); err != nil {
				t.Fatal(err)
			}
			if found := q.keyedView.missingSince.Load() == 0; found != tc.recheck {
				t.Fatalf("after a step of %v the view was looked for again: %v, want %v", tc.step, found, tc.recheck)
			}
		})
	}
}
