package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/jobqueue/jobqueue/queue"
)

// countCommand is a command without arguments that runs one maintenance
// operation of the queue and prints "<done> N jobs" (jobCount: "1 job").
func (a *app) countCommand(use, short, long, done string, op func(context.Context, *queue.Queue) (int64, error)) *cobra.Command {
	return &cobra.Command{
		Use:   use,
		Short: short,
		Long:  long,
		Args:  flagsOnly,
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			return a.printCount(cmd.Context(), done, op)
		}),
	}
}

// printCount runs op on the queue and prints "<done> N jobs" (jobCount:
// "1 job").
func (a *app) printCount(ctx context.Context, done string, op func(context.Context, *queue.Queue) (int64, error)) error {
	return a.withQueue(ctx, func(q *queue.Queue) error {
		n, err := op(ctx, q)
		if err != nil {
			return err
		}
		fmt.Fprintf(a.out, "%s %s\n", done, jobCount(n))
		return nil
	})
}

func (a *app) expireCommand() *cobra.Command {
	return a.countCommand("expire", "Mark pending jobs whose deadline has passed as expired",
		`expire marks the pending jobs whose expires_at has passed as expired and prints
how many. Workers do this on their own from time to time; run it from cron when
no worker runs.`,
		"expired", func(ctx context.Context, q *queue.Queue) (int64, error) { return q.ExpireOverdue(ctx) })
}

func (a *app) pruneCommand() *cobra.Command {
	var olderThan string
	cmd := &cobra.Command{
		Use:   "prune --older-than DUR",
		Short: "Delete completed, failed and expired jobs finished longer ago than DUR",
		Long: `prune deletes the completed, failed and expired jobs that finished longer ago
than --older-than (e.g. 720h or 30d), in bounded batches, and prints how many.
Pending and running jobs are never deleted.`,
		Example: `  jobqueue prune --older-than 30d`,
		Args:    flagsOnly,
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			d, err := parseDuration("--older-than", olderThan)
			if err != nil {
				return err
			}
			return a.printCount(cmd.Context(), "pruned", func(ctx context.Context, q *queue.Queue) (int64, error) {
				return q.Prune(ctx, d)
			})
		}),
	}
	cmd.Flags().StringVar(&olderThan, "older-than", "", "age of finished jobs to delete (e.g. 72h, 30d) (required)")
	cmd.MarkFlagRequired("older-than")
	return cmd
}
