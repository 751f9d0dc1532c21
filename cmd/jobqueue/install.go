package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/jobqueue/jobqueue/migrations"
)

func (a *app) installCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "install",
		Short: "Create the table and its indexes, or check them (idempotent; run on every deploy)",
		Long: `install creates the version 2 table named by --table when it is missing, creates
missing indexes and rebuilds any whose columns differ. It changes nothing on a
table that is already right, and refuses a version 1 (or half-migrated) table:
run 'jobqueue migrate' once for that.`,
		Args: cobra.NoArgs,
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			db, k, name, err := a.open(ctx)
			if err != nil {
				return err
			}
			defer db.Close()
			if err := migrations.Install(ctx, db, name); err != nil {
				return explainTableError(err, name)
			}
			fmt.Fprintf(a.out, "table %s is installed (%s)\n", name, k)
			return nil
		}),
	}
}

func (a *app) migrateCommand() *cobra.Command {
	var maxAttempts, baseDelay, maxDelay int
	cmd := &cobra.Command{
		Use:   "migrate --max-attempts N --base-delay SECS --max-delay SECS",
		Short: "Convert a version 1 table to version 2, storing the given retry policy with every job",
		Long: `migrate converts the version 1 table named by --table to version 2 once, storing
the given retry policy with every job (version 1 kept none, so the policy is
required). Stop producers, workers and cron jobs that use the table first, and
back it up. Version 1 waited 2 × its base delay before the first retry: pass
twice the old base delay to keep the same delays.

A table that is already version 2 is left as it is; a missing table is
installed. On MySQL/MariaDB, where each DDL statement commits on its own, an
interrupted migration completes when run again with the same policy.
The operator's guide is docs/upgrading.md.`,
		Args: cobra.NoArgs,
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			p, err := policyFromFlags(maxAttempts, baseDelay, maxDelay)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			db, k, name, err := a.open(ctx)
			if err != nil {
				return err
			}
			defer db.Close()
			if err := migrations.Migrate(ctx, db, migrations.RetryPolicy(p), name); err != nil {
				// The error says what to do next (on MySQL: run the same
				// command again, which resumes).
				return err
			}
			fmt.Fprintf(a.out, "table %s is version 2 (%s)\n", name, k)
			return nil
		}),
	}
	f := cmd.Flags()
	f.IntVar(&maxAttempts, "max-attempts", 0, "attempts per job, the first included (required)")
	f.IntVar(&baseDelay, "base-delay", 0, "seconds to wait after the first failed attempt; doubles after each (required)")
	f.IntVar(&maxDelay, "max-delay", 0, "longest wait between attempts, in seconds (required)")
	for _, n := range []string{"max-attempts", "base-delay", "max-delay"} {
		cmd.MarkFlagRequired(n)
	}
	return cmd
}
