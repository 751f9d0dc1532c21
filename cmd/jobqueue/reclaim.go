package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/jobqueue/jobqueue/queue"
)

func (a *app) reclaimCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "reclaim",
		Short: "Recover jobs whose worker stopped without finishing them (lease passed)",
		Long: `reclaim finds in_progress jobs whose lease has passed (their worker died or
lost the database) and makes them pending again at once, or failed when their
attempts are used up, or expired when their deadline has passed. It prints how
many, and how many of each, e.g.
  reclaimed 3 jobs: 1 pending again, 1 failed, 1 expired
Workers do this on their own from time to time. The attempts it ends are
counted in no metrics (this command exports none; the line above is their
count): the workers' reclaims and the dashboard's are counted in their
/metrics.`,
		Args: flagsOnly,
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			var ended reclaimReport
			return a.withQueue(ctx, func(q *queue.Queue) error {
				n, err := q.Reclaim(ctx)
				// A Reclaim that failed in a later round has ended the
				// attempts of the earlier ones all the same: say which.
				if err == nil || n > 0 {
					fmt.Fprintln(a.out, ended.line(n))
				}
				return err
			}, queue.WithListener(ended.hear))
		}),
	}
}

// reclaimReport counts the abandoned attempts a Reclaim ended by how it
// ended them, from the queue's EventReclaimed.
type reclaimReport struct {
	byOutcome map[queue.Outcome]int64
}

// hear is the queue's listener: it adds up each EventReclaimed.
func (r *reclaimReport) hear(ev queue.Event) {
	if ev.Kind != queue.EventReclaimed {
		return
	}
	if r.byOutcome == nil {
		r.byOutcome = map[queue.Outcome]int64{}
	}
	for _, c := range ev.Reclaimed {
		r.byOutcome[c.Outcome] += c.Count
	}
}

// line is what the command prints for n reclaimed jobs: "reclaimed 0
// jobs", else their count by outcome, "reclaimed 3 jobs: 1 pending again,
// 1 failed, 1 expired".
func (r *reclaimReport) line(n int64) string {
	if n == 0 {
		return "reclaimed 0 jobs"
	}
	return fmt.Sprintf("reclaimed %s: %d pending again, %d failed, %d expired", jobCount(n),
		r.byOutcome[queue.OutcomeRetried], r.byOutcome[queue.OutcomeFailed], r.byOutcome[queue.OutcomeExpired])
}
