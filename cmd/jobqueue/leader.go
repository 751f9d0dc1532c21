package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/jobqueue/jobqueue/internal/jobtext"
	"github.com/jobqueue/jobqueue/queue"
	"github.com/jobqueue/jobqueue/queue/cron"
)

// leaderJSON is the leadership as `leader --json` prints it: leader is
// false when no worker leads, the other keys then the last holder's (its
// lease passed), or null and empty when no worker has led the table yet.
type leaderJSON struct {
	Leader     bool    `json:"leader"`
	Holder     string  `json:"holder"`
	Term       int64   `json:"term"`
	Since      *string `json:"since"`
	RenewedAt  *string `json:"renewed_at"`
	LeaseUntil *string `json:"lease_until"`
}

func (a *app) leaderCommand() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "leader [--json]",
		Short: "Show which worker leads the table's maintenance and periodic jobs, and since when",
		Long: `leader shows which worker process leads the table's workers: the one that runs
the maintenance (expire, reclaim, prune with --retention) and enqueues the
periodic jobs. It names the worker (host:pid:random), since when it leads,
when it last renewed its lease and when that lease passes. Without a leader
(no worker runs, or the last one stopped) it says so, with the last holder.
Times are the database server's clock, in UTC.`,
		Args: flagsOnly,
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			return a.withQueue(ctx, func(q *queue.Queue) error {
				ld, err := q.Leader(ctx)
				if err != nil {
					return err
				}
				if asJSON {
					out := leaderJSON{}
					if ld != nil {
						out = leaderJSON{Leader: ld.Active, Holder: ld.Holder, Term: ld.Term,
							Since: rfc3339(ld.Since), RenewedAt: rfc3339(ld.RenewedAt), LeaseUntil: rfc3339(ld.LeaseUntil)}
					}
					return writeJSON(a.out, out)
				}
				switch {
				case ld == nil:
					fmt.Fprintf(a.out, "no leader: no worker has led table %s yet\n", q.Table())
				case !ld.Active:
					fmt.Fprintf(a.out, "no leader: the last one, %s, let its lease pass at %s (term %d)\n",
						ld.Holder, ld.LeaseUntil.Format(time.RFC3339), ld.Term)
				default:
					fmt.Fprintf(a.out, "leader %s since %s (term %d; renewed %s, lease until %s)\n",
						ld.Holder, ld.Since.Format(time.RFC3339), ld.Term, ld.RenewedAt.Format(time.RFC3339Nano), ld.LeaseUntil.Format(time.RFC3339Nano))
				}
				return nil
			})
		}),
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func rfc3339(t time.Time) *string {
	s := t.UTC().Format(time.RFC3339Nano)
	return &s
}

// parsePeriodic turns the values of work --periodic, 'NAME=SCHEDULE', into
// periodic jobs of kind NAME, type typ and payload {}. A malformed value is
// a usage error naming the flag.
func parsePeriodic(values []string, typ string) ([]queue.PeriodicJob, error) {
	var jobs []queue.PeriodicJob
	seen := map[string]bool{}
	for _, v := range values {
		name, spec, ok := strings.Cut(v, "=")
		name, spec = strings.TrimSpace(name), strings.TrimSpace(spec)
		if !ok || name == "" || spec == "" {
			return nil, usagef("--periodic %q: want NAME=SCHEDULE, e.g. --periodic 'report=0 3 * * *' or --periodic 'ping=@every 30s'", v)
		}
		if p := jobtext.Problem(name, jobtext.MaxPeriodicName); p != "" {
			return nil, usagef("--periodic %.40q: the name %s", v, p)
		}
		if seen[name] {
			return nil, usagef("--periodic: two periodic jobs are named %q; give each its own name", name)
		}
		seen[name] = true
		sched, err := cron.Parse(spec)
		if err != nil {
			return nil, usagef("--periodic %q: %v", v, err)
		}
		jobs = append(jobs, queue.Periodic(name, sched, queue.RawArgs{Name: name, Payload: []byte("{}")}, queue.Type(typ)))
	}
	return jobs, nil
}
