package main

import (
	"fmt"
	"slices"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/jobqueue/jobqueue/internal/jobtext"
	"github.com/jobqueue/jobqueue/queue"
)

func (a *app) statsCommand() *cobra.Command {
	var typ string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "stats [--type T] [--json]",
		Short: "Count jobs per status",
		Long: `stats counts the jobs of the table (or of one --type: given empty, or one no job
can have, it is refused) per status. With --json it
prints {"` + statusList(`":0,"`, `":0,"`) + `":0}.`,
		Args: flagsOnly,
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			if err := checkFilter(cmd, "type", typ, jobtext.MaxType, "type"); err != nil {
				return err
			}
			ctx := cmd.Context()
			return a.withQueue(ctx, func(q *queue.Queue) error {
				stats, err := q.Stats(ctx, typ)
				if err != nil {
					return err
				}
				return writeStats(a.out, stats, asJSON)
			})
		}),
	}
	cmd.Flags().StringVar(&typ, "type", "", "count only the jobs of this type (queue)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func (a *app) listCommand() *cobra.Command {
	var status, typ, name string
	var limit int
	var afterID int64
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "list [--status S] [--type T] [--name K] [--limit N] [--after-id ID] [--json]",
		Short: "List jobs, newest first",
		Long: `list prints the newest jobs of the table, optionally of one --status
(` + statusList(", ", ", ") + `), one --type and one kind
(--name); a filter given empty, or that no job could have (a type longer
than 64 characters, say), is refused. It prints at most --limit jobs (1 to 100000); for the next page, pass
the last id printed as --after-id, which lists only older jobs. With --json it
prints a JSON array of jobs whose keys are the table's column names.`,
		Args: flagsOnly,
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			if cmd.Flags().Changed("status") && status == "" {
				return usagef("--status is empty; give one of %s, or leave it out for every status", statusList(", ", " or "))
			}
			if err := checkFilter(cmd, "type", typ, jobtext.MaxType, "type"); err != nil {
				return err
			}
			if err := checkFilter(cmd, "name", name, jobtext.MaxKind, "kind"); err != nil {
				return err
			}
			if status != "" && !slices.Contains(queue.Statuses(), queue.Status(status)) {
				return usagef("--status %q is not a status; use %s", status, statusList(", ", " or "))
			}
			if limit < 1 || limit > queue.MaxListLimit {
				return usagef("--limit %d is out of range; use 1 to %d", limit, queue.MaxListLimit)
			}
			if afterID < 0 {
				return usagef("--after-id %d is negative; give the last id of the previous page", afterID)
			}
			ctx := cmd.Context()
			return a.withQueue(ctx, func(q *queue.Queue) error {
				rows, err := q.List(ctx, queue.ListFilter{Status: queue.Status(status), Type: typ, Name: name, Limit: limit, AfterID: afterID})
				if err != nil {
					return err
				}
				if asJSON {
					out := make([]jobJSON, 0, len(rows))
					for _, r := range rows {
						out = append(out, toJSON(r))
					}
					return writeJSON(a.out, out)
				}
				if len(rows) == 0 {
					fmt.Fprintln(a.out, "no jobs")
					return nil
				}
				return writeJobTable(a.out, rows)
			})
		}),
	}
	cmd.Flags().StringVar(&status, "status", "", "only jobs with this status")
	cmd.Flags().StringVar(&typ, "type", "", "only jobs of this type (queue)")
	cmd.Flags().StringVar(&name, "name", "", "only jobs of this kind (exact name)")
	cmd.Flags().IntVar(&limit, "limit", queue.DefaultListLimit, "at most this many jobs")
	cmd.Flags().Int64Var(&afterID, "after-id", 0, "only jobs older than this id (the last id of the previous page)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func (a *app) showCommand() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "show ID [--json]",
		Short: "Show one job",
		Long: `show prints every column of one job, one per line. A text holding a newline,
an escape sequence or another character that is not printable (or starting
with a double quote) is printed quoted, as in list ("two\nlines"); the
payload is printed compacted on one line. A time not set is "-", no error
an empty field (as in list). With --json the keys are the
column names, times are RFC 3339 in UTC or null, the payload is JSON, and
every text is as it is.`,
		Args: oneJobID,
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			id, err := parseID(args[0])
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			return a.withQueue(ctx, func(q *queue.Queue) error {
				job, err := q.Get(ctx, id)
				if err != nil {
					return err
				}
				if asJSON {
					return writeJSON(a.out, toJSON(job))
				}
				return writeJobDetail(a.out, job)
			})
		}),
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// checkFilter refuses the filter --flag (type or name: a job's type or
// kind, whose longest is max; every is what leaving it out selects) when it was given empty, as an unset shell
// variable gives it, or holds a text no job can have (jobtext.Problem, the
// rule the queue enqueues by): either would list or count no job, as if
// there were none.
func checkFilter(cmd *cobra.Command, flag, value string, max int, every string) error {
	if !cmd.Flags().Changed(flag) {
		return nil
	}
	if value == "" {
		return usagef("--%s is empty; leave it out for every %s", flag, every)
	}
	if p := jobtext.Problem(value, max); p != "" {
		return usagef("--%s %s, so no job has it", flag, p)
	}
	return nil
}

// parseID reads a job id argument (a usage error if bad).
func parseID(s string) (int64, error) {
	id, err := strconv.ParseInt(s, 10, 64)
	if err != nil || id < 1 {
		return 0, usagef("%q is not a job id; ids are positive integers", s)
	}
	return id, nil
}
