package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/jobqueue/jobqueue/queue"
)

func (a *app) cancelCommand() *cobra.Command {
	return a.controlCommand("cancel", "Stop jobs: pending or running ones become failed with the error \"cancelled\"",
		`cancel stops each job given: a pending job becomes failed at once with the
error "cancelled"; a running (in_progress) one likewise, and its attempt is
fenced off: its worker's result changes nothing, and the worker stops its
handler at its next heartbeat (at once on PostgreSQL), killing a work --exec
command's whole process group. A job that already finished is left as it is.
'jobqueue retry ID' runs a cancelled job again.

It prints a line per id and exits 1 if any id could not be cancelled (the
others are cancelled all the same).`,
		"cancelled", "job %d cancelled", (*queue.Queue).CancelMany)
}

func (a *app) deleteCommand() *cobra.Command {
	return a.controlCommand("delete", "Remove jobs that are not running",
		`delete removes each job given from the table, whatever its status but
in_progress: a running job is refused (cancel it first with 'jobqueue cancel
ID').

It prints a line per id and exits 1 if any id could not be deleted (the
others are deleted all the same).`,
		"deleted", "job %d deleted", (*queue.Queue).DeleteMany)
}

func (a *app) retryCommand() *cobra.Command {
	return a.controlCommand("retry", "Put failed or expired jobs back to pending, to run now",
		`retry puts each failed or expired job given back to pending, to run now,
with its attempts reset and its error cleared. A deadline that has passed is
cleared too (else the job would expire again); one still ahead is kept. A job
in any other status, a missing id, or a job whose unique key another live job
holds now is refused and left as it is.

It prints a line per id and exits 1 if any id could not be retried (the
others are retried all the same).`,
		"retried", "job %d is pending again", (*queue.Queue).RetryMany)
}

// controlCommand is a command that applies a bulk action to the job ids
// given as arguments and prints a line per id: okLine with the id on
// stdout, or the id's error on stderr; done names the action in the past
// tense for the summary of the ids not done.
func (a *app) controlCommand(name, short, long, done, okLine string, op func(*queue.Queue, context.Context, []int64) ([]queue.IDResult, error)) *cobra.Command {
	cmd := &cobra.Command{
		Use:     name + " ID [ID…]",
		Short:   short,
		Long:    long,
		Example: "  jobqueue " + name + " 42\n  jobqueue " + name + " 42 43 44",
		Args:    someJobIDs,
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			ids := make([]int64, len(args))
			for i, s := range args {
				id, err := parseID(s)
				if err != nil {
					return err
				}
				ids[i] = id
			}
			ctx := cmd.Context()
			return a.withQueue(ctx, func(q *queue.Queue) error {
				res, err := op(q, ctx, ids)
				if err == nil && len(ids) == 1 && len(res) == 1 && res[0].Err != nil {
					// One id: its error is the command's one line.
					return res[0].Err
				}
				failed := 0
				for _, r := range res {
					if r.Err != nil {
						failed++
						fmt.Fprintln(a.err, "jobqueue: "+errorText(r.Err))
						continue
					}
					fmt.Fprintf(a.out, okLine+"\n", r.ID)
				}
				if err != nil {
					return err
				}
				if failed > 0 {
					return fmt.Errorf("%d of %d job(s) not %s", failed, len(ids), done)
				}
				return nil
			})
		}),
	}
	cmd.SetFlagErrorFunc(idFlagError)
	return cmd
}

// idFlagError is the usage error of a flag the command line could not
// parse. A negative id (-5) is an argument that the flag parser took for
// short flags ("unknown shorthand flag: '5' in -5"): it is refused as any
// other bad id is, in the same words (parseID).
func idFlagError(_ *cobra.Command, err error) error {
	msg := err.Error()
	if rest, ok := strings.CutPrefix(msg, "unknown shorthand flag: "); ok {
		if i := strings.LastIndex(rest, " in -"); i >= 0 {
			tok := rest[i+len(" in "):]
			if digits := tok[1:]; digits != "" && strings.Trim(digits, "0123456789") == "" {
				_, err := parseID(tok)
				return err
			}
		}
	}
	return &usageError{err: err}
}
