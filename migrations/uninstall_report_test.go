package migrations_test

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/jobqueue/jobqueue/internal/testdb"
	"github.com/jobqueue/jobqueue/migrations"
	"github.com/jobqueue/jobqueue/queue"
)

// TestUninstallReport: given WithReport, Uninstall and UninstallEmpty say
// what they dropped: the jobs deleted per status (none for an empty
// table), or that the table was missing; a refusal leaves the report as
// it was.
func TestUninstallReport(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		install bool
		jobs    int // pending jobs enqueued, the first of them then cancelled (failed)
		empty   bool
		want    migrations.UninstallReport // Table is filled in by the test
		held    bool                       // UninstallEmpty refuses
	}{
		{name: "jobs, Uninstall", install: true, jobs: 3, want: migrations.UninstallReport{Counts: []migrations.StatusCount{{Status: "pending", Jobs: 2}, {Status: "failed", Jobs: 1}}}},
		{name: "empty, Uninstall", install: true, want: migrations.UninstallReport{}},
		{name: "missing, Uninstall", want: migrations.UninstallReport{Missing: true}},
		{name: "jobs, UninstallEmpty", install: true, jobs: 2, empty: true, held: true},
		{name: "empty, UninstallEmpty", install: true, empty: true, want: migrations.UninstallReport{}},
		{name: "missing, UninstallEmpty", empty: true, want: migrations.UninstallReport{Missing: true}},
	}
	testdb.ForEachEngine(t, func(t *testing.T, e *testdb.Env) {
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				ctx := context.Background()
				name := e.Table(t)
				if tc.install {
					if err := migrations.Install(ctx, e.DB, name); err != nil {
						t.Fatal(err)
					}
				}
				if tc.jobs > 0 {
					q, err := queue.New(e.DB, queue.WithTable(name), queue.WithLogger(testdb.QuietLogger()))
					if err != nil {
						t.Fatal(err)
					}
					var ids []int64
					for range tc.jobs {
						id, err := q.Enqueue(ctx, emailJob{To: "a@example.com"})
						if err != nil {
							t.Fatal(err)
						}
						ids = append(ids, id)
					}
					if err := q.Cancel(ctx, ids[0]); err != nil {
						t.Fatal(err)
					}
					if err := q.Close(); err != nil {
						t.Fatal(err)
					}
				}
				drop := migrations.Uninstall
				if tc.empty {
					drop = migrations.UninstallEmpty
				}
				before := migrations.UninstallReport{Table: "untouched"}
				got := before
				err := drop(ctx, e.DB, name, migrations.WithReport(&got))
				if tc.held {
					var held *migrations.JobsHeldError
					if !errors.As(err, &held) {
						t.Fatalf("UninstallEmpty of a table with jobs = %v; want a *JobsHeldError", err)
					}
					if diff := cmp.Diff(before, got); diff != "" {
						t.Errorf("the report after a refusal (-before +after):\n%s", diff)
					}
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				want := tc.want
				want.Table = name
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("report (-want +got):\n%s", diff)
				}
				var wantTotal int64
				for _, c := range want.Counts {
					wantTotal += c.Jobs
				}
				if got.Total() != wantTotal {
					t.Errorf("Total() = %d, want %d", got.Total(), wantTotal)
				}
			})
		}
	})
}
