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

// TestListPageWindow pages through ListPage with a window of 5 ids and a
// limit of 3 on 30 jobs: a kind without a type (no index holds the kind)
// examines at most the window's ids per page, so a page may be short, even
// empty, with NextAfterID at the window's floor; following NextAfterID
// reaches every match once, newest first, and the last page's NextAfterID
// is 0. Filters an index serves page as List does.
func TestListPageWindow(t *testing.T) {
	forEachEngine(t, func(t *testing.T, kind engine.Kind) {
		ctx := context.Background()
		env := coreEnv(t, kind)
		q, _ := coreQueue(t, env)
		// Job i (0 to 29): "rare" at 0 (pending) and 1 (type a, claimed);
		// "near" at 22, 27 and 28; "common" elsewhere.
		for i := 0; i < 30; i++ {
			name, typ := "common", "b"
			switch i {
			case 0:
				name = "rare"
			case 1:
				name, typ = "rare", "a"
			case 22, 27, 28:
				name = "near"
			}
			mustEnqueue(t, q, RawArgs{Name: name, Payload: json.RawMessage(fmt.Sprintf(`{"i":%d}`, i))}, Type(typ))
		}
		mustClaim(t, q, []string{"a"}, 1, time.Minute)
		all, err := q.List(ctx, ListFilter{Limit: MaxListLimit})
		if err != nil || len(all) != 30 {
			t.Fatalf("List of everything = %d jobs, %v; want 30", len(all), err)
		}
		newest := all[0].ID

		cases := []struct {
			name   string
			f      ListFilter
			window int64
			want   int  // how many jobs match
			pages  int  // how many pages reach them all
			first  int  // how many jobs the first page holds
			cut    bool // whether the first page's window ended it short
		}{
			{"rare kind far back", ListFilter{Name: "rare"}, 5, 2, 6, 0, true},
			{"kind with matches in the window", ListFilter{Name: "near"}, 5, 3, 6, 2, true},
			{"kind and status", ListFilter{Name: "rare", Status: StatusInProgress}, 5, 1, 6, 0, true},
			{"kind matching nothing", ListFilter{Name: "nothing"}, 5, 0, 6, 0, true},
			{"common kind fills its pages", ListFilter{Name: "common"}, 5, 25, 9, 3, true},
			{"kind without a window", ListFilter{Name: "rare"}, 0, 2, 1, 2, false},
			{"type", ListFilter{Type: "a"}, 5, 1, 1, 1, false},
			{"type and kind", ListFilter{Type: "b", Name: "near"}, 5, 3, 1, 3, false},
			{"status", ListFilter{Status: StatusInProgress}, 5, 1, 1, 1, false},
			{"no filter", ListFilter{}, 5, 30, 10, 3, false},
			{"window wider than the table", ListFilter{Name: "rare"}, 1000, 2, 1, 2, false},
			// An AfterID far above the newest job: the window starts at
			// the newest job below it, not at AfterID, else millions of
			// empty pages would come first.
			{"AfterID far above the newest job", ListFilter{Name: "rare", AfterID: 1 << 40}, 5, 2, 6, 0, true},
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
				if len(want) != c.want {
					t.Fatalf("%d jobs match %+v; the setup meant %d", len(want), c.f, c.want)
				}
				f := c.f
				f.Limit = 3
				var got []int64
				pages := 0
				for {
					pages++
					if pages > 31 {
						t.Fatalf("paging does not end; so far %v", got)
					}
					p, err := q.ListPage(ctx, f, c.window)
					if err != nil {
						t.Fatalf("ListPage(%+v, %d): %v", f, c.window, err)
					}
					if len(p.Jobs) > 3 {
						t.Fatalf("page %d holds %d jobs; the limit is 3", pages, len(p.Jobs))
					}
					if pages == 1 {
						if len(p.Jobs) != c.first || (p.SearchedFrom != 0) != c.cut {
							t.Fatalf("first page: %d jobs, searched %d to %d; want %d jobs, cut %v", len(p.Jobs), p.SearchedFrom, p.SearchedTo, c.first, c.cut)
						}
					}
					if p.SearchedFrom != 0 {
						top := newest
						if f.AfterID != 0 {
							top = min(top, f.AfterID-1)
						}
						if p.SearchedTo != top || p.SearchedFrom != top-c.window+1 || p.NextAfterID != p.SearchedFrom {
							t.Fatalf("page %d (after %d): searched %d to %d, next %d; want %d to %d, next %d",
								pages, f.AfterID, p.SearchedFrom, p.SearchedTo, p.NextAfterID, top-c.window+1, top, top-c.window+1)
						}
					}
					for _, j := range p.Jobs {
						if p.SearchedFrom != 0 && (j.ID < p.SearchedFrom || j.ID > p.SearchedTo) {
							t.Fatalf("job %d is outside the window %d to %d", j.ID, p.SearchedFrom, p.SearchedTo)
						}
						got = append(got, j.ID)
					}
					if p.NextAfterID == 0 {
						break
					}
					if p.SearchedFrom == 0 && (len(p.Jobs) != 3 || p.NextAfterID != p.Jobs[2].ID) {
						t.Fatalf("page %d: %d jobs, next %d; a page its window did not end goes on after its last job", pages, len(p.Jobs), p.NextAfterID)
					}
					f.AfterID = p.NextAfterID
				}
				if !slices.Equal(got, want) || pages != c.pages {
					t.Fatalf("paging found %v in %d pages; want %v in %d", got, pages, want, c.pages)
				}
			})
		}
	})
}

// TestListPageInvalid: ListPage refuses what List refuses, and a negative
// window, with ErrInvalidFilter, reading nothing.
func TestListPageInvalid(t *testing.T) {
	forEachEngine(t, func(t *testing.T, kind engine.Kind) {
		q, _ := coreQueue(t, coreEnv(t, kind))
		for _, c := range []struct {
			name   string
			f      ListFilter
			window int64
		}{
			{"negative window", ListFilter{Name: "x"}, -1},
			{"unknown status", ListFilter{Status: "done"}, 5},
			{"negative AfterID", ListFilter{AfterID: -1}, 5},
			{"limit too large", ListFilter{Limit: MaxListLimit + 1}, 5},
		} {
			t.Run(c.name, func(t *testing.T) {
				p, err := q.ListPage(context.Background(), c.f, c.window)
				if !errors.Is(err, ErrInvalidFilter) || p.Jobs != nil {
					t.Fatalf("ListPage(%+v, %d) = %v, %v; want ErrInvalidFilter", c.f, c.window, p, err)
				}
			})
		}
	})
}

// TestListPageWindowReadFails: a window's read that fails fails ListPage.
// The page's context ends as the window's statement is about to be sent
// (after the read of the newest id below the page's start went through);
// ListPage returned an empty page and no error, the read's error lost to
// a shadowed variable.
func TestListPageWindowReadFails(t *testing.T) {
	forEachEngine(t, func(t *testing.T, kind engine.Kind) {
		env := coreEnv(t, kind)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		q := env.queue(t, nil, withStatementHook(func(query string, _ sqlRunner) {
			if strings.Contains(query, "-- name: ListJobsWindow ") {
				cancel()
			}
		}))
		mustEnqueue(t, q, RawArgs{Name: "rare", Payload: json.RawMessage(`{}`)})
		p, err := q.ListPage(ctx, ListFilter{Name: "rare"}, 5)
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("ListPage with the window's read cut off = %+v, %v; want an error wrapping context.Canceled", p, err)
		}
	})
}
