package queue

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/jobqueue/jobqueue/internal/engine"
)

// TestInvalidIDs: Get, Cancel, Delete, Retry and their many-id forms
// given an id that is not positive (0 or below) fail with ErrInvalidID,
// not ErrJobNotFound or false, naming the id and saying ids are positive;
// nothing is written, for the many-id forms not even for the valid ids
// given with it.
func TestInvalidIDs(t *testing.T) {
	forEachEngine(t, func(t *testing.T, kind engine.Kind) {
		ctx := context.Background()
		env := coreEnv(t, kind)
		q, clock := coreQueue(t, env)
		f := newControlFixture(t, q, clock)
		valid := []int64{f.pending, f.running, f.completed, f.failed, f.expired}
		before := map[int64]string{}
		for _, id := range valid {
			before[id] = jobState(t, q, id)
		}
		many := func(op func(context.Context, []int64) ([]IDResult, error), bad int64) func() error {
			return func() error {
				res, err := op(ctx, append(append([]int64{}, valid...), bad))
				if res != nil {
					t.Errorf("results %v given with the error; want none", res)
				}
				return err
			}
		}
		cases := []struct {
			name string
			id   int64
			call func() error
		}{
			{"Get 0", 0, func() error { _, err := q.Get(ctx, 0); return err }},
			{"Get -1", -1, func() error { _, err := q.Get(ctx, -1); return err }},
			{"Cancel 0", 0, func() error { return q.Cancel(ctx, 0) }},
			{"Cancel -7", -7, func() error { return q.Cancel(ctx, -7) }},
			{"Delete 0", 0, func() error { return q.Delete(ctx, 0) }},
			{"Delete -1", -1, func() error { return q.Delete(ctx, -1) }},
			{"Retry 0", 0, func() error {
				ok, err := q.Retry(ctx, 0)
				if ok {
					t.Error("Retry(0) = true")
				}
				return err
			}},
			{"Retry -3", -3, func() error { _, err := q.Retry(ctx, -3); return err }},
			{"CancelMany with 0", 0, many(q.CancelMany, 0)},
			{"DeleteMany with -1", -1, many(q.DeleteMany, -1)},
			{"RetryMany with 0", 0, many(q.RetryMany, 0)},
		}
		for _, c := range cases {
			err := c.call()
			if !errors.Is(err, ErrInvalidID) || errors.Is(err, ErrJobNotFound) {
				t.Errorf("%s: error %v; want one wrapping ErrInvalidID (and not ErrJobNotFound)", c.name, err)
				continue
			}
			for _, s := range []string{fmt.Sprintf("job id %d", c.id), "positive"} {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("%s: error %q does not say %q", c.name, err, s)
				}
			}
		}
		for _, id := range valid {
			if after := jobState(t, q, id); after != before[id] {
				t.Errorf("job %d changed: %s -> %s", id, before[id], after)
			}
		}
	})
}
