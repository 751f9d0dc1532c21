package queue

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/jobqueue/jobqueue/internal/engine"
)

func TestOverviewReads(t *testing.T) {
	forEachEngine(t, func(t *testing.T, kind engine.Kind) {
		ctx := context.Background()
		env := coreEnv(t, kind)
		q, clock := coreQueue(t, env)

		// An empty table.
		types, more, err := q.Types(ctx, 0)
		if err != nil || len(types) != 0 || more {
			t.Fatalf("Types on an empty table = %v, %v, %v", types, more, err)
		}
		if j, err := q.OldestDue(ctx, ""); err != nil || j != nil {
			t.Fatalf("OldestDue on an empty table = %v, %v", j, err)
		}

		now := clock.now()
		oldEmail := mustEnqueue(t, q, testArgs{N: 1}, Type("email"), At(now.Add(-time.Hour)))
		mustEnqueue(t, q, testArgs{N: 2}, Type("email"), At(now.Add(-time.Minute)))
		mustEnqueue(t, q, testArgs{N: 3}, Type("email"), At(now.Add(time.Hour))) // not due
		oldSMS := mustEnqueue(t, q, testArgs{N: 4}, Type("sms"), At(now.Add(-2*time.Minute)))
		mustEnqueue(t, q, testArgs{N: 5}, Type("sms"))
		mustEnqueue(t, q, testArgs{N: 6}, Type("zz_later"), At(now.Add(time.Hour)))
		// Two failed jobs of type default, failed for good one after the other.
		var failed []int64
		for i := 0; i < 2; i++ {
			id := mustEnqueue(t, q, testArgs{N: 10 + i})
			jobs := mustClaim(t, q, []string{"default"}, 1, time.Minute)
			if len(jobs) != 1 || jobs[0].ID != id {
				t.Fatalf("claimed %v, want job %d", jobs, id)
			}
			if _, _, err := q.fail(ctx, jobs[0], Permanent(errors.New("boom"))); err != nil {
				t.Fatal(err)
			}
			failed = append(failed, id)
			clock.add(time.Second)
		}

		types, more, err = q.Types(ctx, 0)
		if err != nil || more {
			t.Fatalf("Types = %v, %v, %v", types, more, err)
		}
		if diff := cmp.Diff([]string{"default", "email", "sms", "zz_later"}, types); diff != "" {
			t.Fatalf("Types (-want +got):\n%s", diff)
		}
		types, more, err = q.Types(ctx, 2)
		if err != nil || !more || len(types) != 2 || types[1] != "email" {
			t.Fatalf("Types(max 2) = %v, %v, %v; want [default email], more", types, more, err)
		}

		countCases := []struct {
			name  string
			typ   string
			limit int64
			want  map[Status]int64
		}{
			{"all", "", 100, map[Status]int64{StatusPending: 6, StatusFailed: 2}},
			{"all capped", "", 3, map[Status]int64{StatusPending: 3, StatusFailed: 2}},
			{"email", "email", 100, map[Status]int64{StatusPending: 3}},
			{"email capped", "email", 1, map[Status]int64{StatusPending: 1}},
			{"default", "default", 1000000, map[Status]int64{StatusFailed: 2}},
			{"unknown type", "nope", 10, map[Status]int64{}},
			{"type with NUL", "email\x00", 100, map[Status]int64{}},
			{"type not UTF-8", "email\xff", 100, map[Status]int64{}},
		}
		for _, c := range countCases {
			t.Run(c.name, func(t *testing.T) {
				got, err := q.StatsUpTo(ctx, c.typ, c.limit)
				if err != nil {
					t.Fatal(err)
				}
				// Stats agrees, where the counts stay under the limit.
				if all, err := q.Stats(ctx, c.typ); err != nil {
					t.Fatalf("Stats(%q): %v", c.typ, err)
				} else if c.limit >= 100 && !cmp.Equal(all, got) {
					t.Fatalf("Stats(%q) = %v, StatsUpTo = %v", c.typ, all, got)
				}
				want := map[Status]int64{}
				for _, s := range Statuses() {
					want[s] = c.want[s]
				}
				if diff := cmp.Diff(want, got); diff != "" {
					t.Fatalf("StatsUpTo(%q, %d) (-want +got):\n%s", c.typ, c.limit, diff)
				}
			})
		}
		if _, err := q.StatsUpTo(ctx, "", 0); err == nil {
			t.Fatal("StatsUpTo with limit 0: no error")
		}

		oldestCases := []struct {
			typ  string
			want int64 // 0: none
		}{
			{"", oldEmail},
			{"email", oldEmail},
			{"sms", oldSMS},
			{"zz_later", 0},
			{"default", 0},
			{strings.Repeat("t", 65), 0}, // longer than any type: no job, no error
			{"email\x00", 0},             // PostgreSQL refused a NUL with an error
			{"email\xff", 0},             // and text that is not UTF-8
		}
		for _, c := range oldestCases {
			got, err := q.OldestDue(ctx, c.typ)
			if err != nil {
				t.Fatal(err)
			}
			var id int64
			if got != nil {
				id = got.ID
			}
			if id != c.want {
				t.Fatalf("OldestDue(%q) = job %d, want %d", c.typ, id, c.want)
			}
		}

		rows, err := q.RecentFailures(ctx, 0)
		if err != nil {
			t.Fatal(err)
		}
		var ids []int64
		for _, r := range rows {
			ids = append(ids, r.ID)
		}
		if diff := cmp.Diff([]int64{failed[1], failed[0]}, ids); diff != "" {
			t.Fatalf("RecentFailures, latest first (-want +got):\n%s", diff)
		}
		if rows, err := q.RecentFailures(ctx, 1); err != nil || len(rows) != 1 || rows[0].ID != failed[1] {
			t.Fatalf("RecentFailures(1) = %v, %v", rows, err)
		}
		if rows, err := q.RecentFailures(ctx, 1_000_000); err != nil || len(rows) != 2 {
			t.Fatalf("RecentFailures(1 000 000) = %v, %v; want both (the limit capped at 1000)", rows, err)
		}
	})
}
