package queue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jobqueue/jobqueue/internal/engine"
)

// TestListPages pages through filtered listings with small limits: every
// matching job comes exactly once, newest first, and the pages end with a
// short (or empty) one.
func TestListPages(t *testing.T) {
	forEachEngine(t, func(t *testing.T, kind engine.Kind) {
		ctx := context.Background()
		env := coreEnv(t, kind)
		q, _ := coreQueue(t, env)
		// 24 jobs: types a/b, kinds x/y/z, some claimed (in_progress).
		for i := 0; i < 24; i++ {
			typ := []string{"a", "b"}[i%2]
			name := []string{"x", "y", "z"}[i%3]
			mustEnqueue(t, q, RawArgs{Name: name, Payload: json.RawMessage(fmt.Sprintf(`{"i":%d}`, i))}, Type(typ))
		}
		mustClaim(t, q, []string{"a"}, 5, time.Minute)
		mustClaim(t, q, []string{"b"}, 2, time.Minute)
		all, err := q.List(ctx, ListFilter{Limit: MaxListLimit})
		if err != nil || len(all) != 24 {
			t.Fatalf("List of everything = %d jobs, %v; want 24", len(all), err)
		}
		for i := 1; i < len(all); i++ {
			if all[i].ID >= all[i-1].ID {
				t.Fatalf("List is not newest first: %v", ids(all))
			}
		}

		cases := []struct {
			name string
			f    ListFilter
			want int // how many jobs match
		}{
			{"all", ListFilter{}, 24},
			{"status", ListFilter{Status: StatusPending}, 17},
			{"type", ListFilter{Type: "a"}, 12},
			{"kind", ListFilter{Name: "y"}, 8},
			{"status and type", ListFilter{Status: StatusInProgress, Type: "a"}, 5},
			{"type and kind", ListFilter{Type: "b", Name: "z"}, 4},
			{"all three", ListFilter{Status: StatusPending, Type: "b", Name: "x"}, 3},
			{"no match", ListFilter{Name: "nothing"}, 0},
			{"kind too long", ListFilter{Name: strings.Repeat("k", maxKindLen+1)}, 0},
			// Values no job can hold (textProblem): nothing, and no error
			// (PostgreSQL refused them with one).
			{"kind with NUL", ListFilter{Name: "x\x00"}, 0},
			{"type not UTF-8", ListFilter{Type: "a\xff"}, 0},
			{"type ending in a space", ListFilter{Type: "a "}, 0}, // MySQL matched "a"
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				var want []int64
				for _, j := range all {
					if (c.f.Status == "" || j.Status == c.f.Status) && (c.f.Type == "" || j.Type == c.f.Type) &&
						(c.f.Name == "" || j.Name == c.f.Name) {
						want = append(want, j.ID)
					}
				}
				if c.want >= 0 && len(want) != c.want {
					t.Fatalf("%d jobs match %+v; the setup meant %d", len(want), c.f, c.want)
				}
				for _, limit := range []int{1, 3, 5, 100} {
					f := c.f
					f.Limit = limit
					var got []int64
					for pages := 0; ; pages++ {
						if pages > len(want)+1 {
							t.Fatalf("limit %d: paging does not end; so far %v", limit, got)
						}
						page, err := q.List(ctx, f)
						if err != nil {
							t.Fatalf("List(%+v): %v", f, err)
						}
						if len(page) > limit {
							t.Fatalf("List(%+v) returned %d jobs", f, len(page))
						}
						for _, j := range page {
							if f.AfterID > 0 && j.ID >= f.AfterID {
								t.Fatalf("List(%+v) returned id %d, not below AfterID", f, j.ID)
							}
							got = append(got, j.ID)
						}
						if len(page) < limit {
							break
						}
						f.AfterID = page[len(page)-1].ID
					}
					if !slices.Equal(got, want) {
						t.Fatalf("limit %d: pages gave %v; want %v", limit, got, want)
					}
				}
			})
		}

		// A job enqueued while paging is not on the later pages, and none
		// repeats.
		first, err := q.List(ctx, ListFilter{Limit: 10})
		if err != nil || len(first) != 10 {
			t.Fatalf("first page = %d jobs, %v", len(first), err)
		}
		newer := mustEnqueue(t, q, testArgs{N: 99})
		rest, err := q.List(ctx, ListFilter{Limit: 100, AfterID: first[9].ID})
		if err != nil || len(rest) != 14 || slices.Contains(ids(rest), newer) {
			t.Fatalf("page after %d = %v, %v; want the 14 older jobs", first[9].ID, ids(rest), err)
		}
		if got, err := q.List(ctx, ListFilter{AfterID: all[len(all)-1].ID}); err != nil || len(got) != 0 {
			t.Fatalf("page after the oldest job = %v, %v; want none", ids(got), err)
		}
	})
}

// TestListRejectsBadFilters: a filter List cannot run is an error wrapping
// ErrInvalidFilter that says what to use instead.
func TestListRejectsBadFilters(t *testing.T) {
	forEachEngine(t, func(t *testing.T, kind engine.Kind) {
		ctx := context.Background()
		env := coreEnv(t, kind)
		q, _ := coreQueue(t, env)
		mustEnqueue(t, q, testArgs{N: 1})
		cases := []struct {
			name string
			f    ListFilter
			says string
		}{
			{"unknown status", ListFilter{Status: "weird"}, "use one of"},
			{"negative limit", ListFilter{Limit: -1}, "use 1 to 100000"},
			{"limit above the maximum", ListFilter{Limit: MaxListLimit + 1}, "use 1 to 100000"},
			{"negative AfterID", ListFilter{AfterID: -5}, "use 0 for the first page"},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				got, err := q.List(ctx, c.f)
				if !errors.Is(err, ErrInvalidFilter) || got != nil || !strings.Contains(err.Error(), c.says) {
					t.Fatalf("List(%+v) = %v, %v; want ErrInvalidFilter saying %q", c.f, got, err, c.says)
				}
			})
		}
	})
}
