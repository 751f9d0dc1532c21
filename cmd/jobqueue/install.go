package main

import (
	"context"
	"database/sql"
	"errors"
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
		Args: flagsOnly,
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
		Args: flagsOnly,
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
				// command again, which resumes): name the command.
				return runAgain(err, fmt.Sprintf("jobqueue migrate --table %s --max-attempts %d --base-delay %d --max-delay %d",
					name, maxAttempts, baseDelay, maxDelay))
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

func (a *app) uninstallCommand() *cobra.Command {
	var force bool
	cmd := &cobra.Command{
		Use:   "uninstall [--force]",
		Short: "Drop the table with its indexes and side tables (refused while it holds jobs, unless --force)",
		Long: `uninstall drops the table named by --table with its indexes and side tables
(the leadership's and the unique keys' tables), what install created. A table
that holds jobs is refused unless --force is given, and then EVERY JOB IN IT IS
DELETED: stop the workers and producers that use it first. Without --force the
jobs are counted and the table dropped under one lock that enqueues wait for,
so a job enqueued meanwhile is counted (and the table kept), never dropped;
with --force the jobs it says were deleted are counted under that lock too,
so the figure is exact. A version 1 table
is refused unless --force, too. A table of the name that is not a jobqueue
table is never dropped. When the table is missing, what is left of its side
tables is dropped.`,
		Args: flagsOnly,
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			db, k, name, err := a.open(ctx)
			if err != nil {
				return err
			}
			defer db.Close()
			if err := uninstallable(ctx, db, name, force); err != nil {
				return err
			}
			// The jobs are counted, and the table dropped, under one
			// lock that enqueues wait for: without --force a job
			// enqueued meanwhile is counted and the table kept, with
			// --force the figure printed is what was deleted.
			var dropped migrations.UninstallReport
			drop := migrations.Uninstall
			if !force {
				drop = migrations.UninstallEmpty
			}
			if err := drop(ctx, db, name, migrations.WithReport(&dropped)); err != nil {
				var held *migrations.JobsHeldError
				if errors.As(err, &held) {
					return heldError(name, held)
				}
				again := "jobqueue uninstall --table " + name
				if force {
					again += " --force"
				}
				return runAgain(err, again)
			}
			if dropped.Missing {
				fmt.Fprintf(a.out, "table %s was not installed (%s); nothing of it is left\n", name, k)
			} else {
				fmt.Fprintf(a.out, "table %s is uninstalled (%s); %s deleted with it\n", name, k, jobCount(dropped.Total()))
			}
			return nil
		}),
	}
	cmd.Flags().BoolVar(&force, "force", false, "drop the table even though it holds jobs, DELETING THEM")
	return cmd
}

// uninstallable tells why uninstall may not drop the table name, or nil:
// a version 1 table without force; a table that is not a jobqueue table,
// even with force. (Whether it holds jobs is counted by the drop itself,
// under its lock.)
func uninstallable(ctx context.Context, db *sql.DB, name string, force bool) error {
	err := migrations.Check(ctx, db, name)
	switch {
	case errors.Is(err, migrations.ErrTableMissing):
		return nil
	case errors.Is(err, migrations.ErrOutdatedTable):
		if !force {
			return fmt.Errorf("table %s is a version 1 (or partly migrated) jobqueue table; uninstall would delete its jobs with it: pass --force to drop it anyway (or convert it with 'jobqueue migrate')", name)
		}
		return nil
	case err != nil:
		return explainTableError(err, name)
	}
	return nil
}

// heldError is uninstall's refusal, without --force, of the table name
// holding the jobs held counts.
func heldError(name string, held *migrations.JobsHeldError) error {
	return fmt.Errorf("table %s holds %s (%s); uninstall would delete them with it: stop the workers and producers that use it, then pass --force", name, jobCount(held.Total()), held.Summary())
}

// runAgain gives err, when it advises to run a call of the migrations
// package again (a *migrations.RunAgainError), advising the command line
// that does the same instead, so that a CLI user is told what to type.
// Migrate and Uninstall return it unwrapped, so the copy's text is all of
// err's. Other errors are returned as they are.
func runAgain(err error, line string) error {
	var again *migrations.RunAgainError
	if !errors.As(err, &again) {
		return err
	}
	cli := *again
	cli.Step = "'" + line + "'"
	return &cli
}
