// Command jobqueue installs, migrates, inspects and operates a jobqueue table
// on PostgreSQL, MySQL/MariaDB or SQLite, runs jobs through any program with
// `work --exec`, shows the life of jobs with `demo`, and measures a database
// with `bench`.
//
// Usage:
//
//	jobqueue [--db URL] [--table NAME] COMMAND [flags]
//
// The database URL is --db, else $JOBQUEUE_DB, else sqlite:jobqueue.db. Exit
// status: 0 on success, 1 on failure, 2 on bad usage; errors are one line on
// stderr. Run `jobqueue --help` or `jobqueue COMMAND --help` for details.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	// The IANA time zones (about 450 KB), for --periodic 'CRON_TZ=ZONE …'
	// on a machine or minimal image without /usr/share/zoneinfo. Here, not
	// in queue/cron: a program using the library decides for itself.
	_ "time/tzdata"
)

func main() {
	sigs := []os.Signal{os.Interrupt, syscall.SIGTERM}
	// SIGHUP (the terminal or ssh session closed) too: by default it would
	// end a worker at once, leaving its commands, in process groups of their
	// own that the hangup does not reach, running on unwatched. Unless it is
	// ignored (nohup): catching it would undo that.
	if !signal.Ignored(syscall.SIGHUP) {
		sigs = append(sigs, syscall.SIGHUP)
	}
	// The first signal stops the command gracefully (ctx ends); a second
	// one makes work and web stop at once (hard); a third ends the process
	// there and then, should the hard stop be stuck.
	ctx, hard, stop := notifyStops(context.Background(), exitOnThirdSignal, sigs...)
	code := run(ctx, hard, os.Args[1:], streams{in: os.Stdin, out: os.Stdout, err: os.Stderr})
	stop()
	os.Exit(code)
}

// exitOnThirdSignal ends the process at once (exit status 1), saying so
// on stderr: a third stop signal, the stop asked for by the first two being
// stuck. What work's commands were running is left to their process groups
// and their jobs to their leases.
func exitOnThirdSignal() {
	fmt.Fprintln(os.Stderr, "jobqueue: third signal: exiting at once, without waiting for the stop in progress; jobs still in_progress are reclaimed once their leases pass")
	os.Exit(exitFailure)
}
