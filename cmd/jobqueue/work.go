package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/jobqueue/jobqueue/internal/jobtext"
	"github.com/jobqueue/jobqueue/queue"
)

func (a *app) workCommand() *cobra.Command {
	var (
		types                []string
		concurrency, maxJobs int
		lease, maxRuntime    string
		grace, logLevel      string
		pollInterval         string
		pollOnly             bool
		command              string
		periodic             []string
		runMissed            bool
		retention            string
		leaderLease          string
		maintenance          string
		metricsAddr          string
		countLimit           int64
		passEnv              []string
	)
	cmd := &cobra.Command{
		Use:   "work --exec CMD [--type T …] [--concurrency N] [--lease DUR] [--max-jobs N] [--max-runtime DUR] [--periodic 'NAME=SCHEDULE' …] [--run-missed] [--retention DUR] [--metrics-addr ADDR [--metrics-count-limit N]]",
		Short: "Run jobs with a shell command until stopped",
		Long: `work claims jobs of the given types (every type by default) and runs CMD through
'sh -c' for each: the job's payload on stdin; JOB_ID, JOB_NAME, JOB_TYPE and
JOB_ATTEMPT (1 for the first attempt) in the environment, which is the worker's
without JOBQUEUE_DB and JOBQUEUE_WEB_PASSWORD (they may hold a password; a
command that needs one, to enqueue a job, say, gets it with --pass-env NAME).
Exit status 0
completes the job; anything else fails it with the end of the command's stderr
as its error, and it is retried with backoff while it has attempts left. The
command's stdout and stderr are passed through.

As PID 1 (in a container without an init) the worker, on Linux, reaps the
processes the commands leave behind (a background process whose shell exited
becomes its child), which would otherwise stay zombies; /proc must be the
container's (it is in Docker, Kubernetes and with unshare --mount-proc), else
it warns at start and reaps nothing. No init (docker run --init) is needed.

The lease is extended while the command runs. The command runs in its own
process group, killed as a whole if the job is lost (lease taken over) or when
the worker is stopped and the grace period is over; a job cut off that way is
not failed but released at once, pending again (failed only if that was its
last attempt), for the next worker.

An idle worker looks for due jobs every --poll-interval; on PostgreSQL it also
LISTENs for new jobs, on MySQL it waits on a connection of its own that the
enqueues of other processes interrupt, and on SQLite it watches the database
file for the commits of other processes (every 2 ms while jobs come, every 20 ms
otherwise; a read of shared memory), so they start at once (--poll-only turns that
off). Behind ProxySQL's multiplexing, which would read the MySQL session ids of
the enqueues' KILL QUERY as its own, pass --transaction-pooling (before or after
the command) to work and to every command that enqueues: their workers poll only
and their enqueues interrupt no wait; behind PgBouncer in transaction mode, with
default_query_exec_mode=exec in the URL (which --transaction-pooling adds), the
worker polls only by itself.

Among all the workers of a table (any number of processes and machines) one
leads, elected through the table <table>_leader: it alone runs the maintenance
every --maintenance-interval (expire overdue jobs, reclaim abandoned attempts,
and with --retention prune finished jobs older than that, all in bounded
batches) and enqueues the periodic jobs. When it stops, another takes over at
once; when it dies, within --leader-lease and a fifth of it. 'jobqueue leader'
shows who leads.

--periodic 'NAME=SCHEDULE' (repeatable) makes the leader enqueue a job of kind
NAME, of the first --type (or default), with payload {}, at each tick of
SCHEDULE: 5 cron fields (minute hour day-of-month month day-of-week), @hourly,
@daily, @weekly, @monthly or @every DUR, in UTC unless prefixed with
CRON_TZ=ZONE (e.g. 'report=CRON_TZ=Europe/Paris 0 3 * * *'; the binary carries
the time zones, no /usr/share/zoneinfo needed). Each tick is
enqueued once, whatever the number of workers; ticks that passed while no
worker led are skipped, except the latest with --run-missed. Give every worker
of the table the same --periodic flags.

--metrics-addr HOST:PORT serves /metrics there in the Prometheus text format
while the worker runs: the attempts this process worked
(jobqueue_jobs_worked_total by type and outcome, jobqueue_job_duration_seconds,
jobqueue_job_wait_seconds) and the jobs it enqueued (periodic ones:
jobqueue_jobs_enqueued_total), and the table's jobs per type
and status and oldest due pending job's age per type (jobqueue_jobs,
jobqueue_oldest_pending_age_seconds), read at most once per 5s whatever the
scrape rate (--metrics-count-limit N stops each count at N, for a table of
millions of rows). Port 0 picks a free port; the URL is logged at start.

SIGINT, SIGTERM or SIGHUP stops claiming (logged at once, whatever the database
does); running commands get --grace to finish, then the worker exits 0. The grace
starts at once, also while a claim waits for a locked table: that claim is
cancelled once no command runs (an idle worker exits at once), and the jobs it
takes are given back, never run. A second such signal during the grace (Ctrl-C again) ends it
at once: the running commands' process groups are killed and their jobs released,
as when --grace has passed, and the worker exits 0. Should that be stuck (a
database out of reach, say), a third signal ends the process there and then
(exit status 1), leaving the commands' process groups running and their jobs
in_progress until their leases pass. --max-jobs and --max-runtime
stop it on their own (0, their default, is no limit).`,
		Example: `  jobqueue work --type email --concurrency 4 --exec './send-email.py'
  jobqueue work --exec 'jq -r .to; test "$JOB_ATTEMPT" -gt 1' --max-jobs 10
  jobqueue work --type reports --exec ./report.sh --periodic 'nightly=0 3 * * *' --retention 720h`,
		Args: flagsOnly,
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			if strings.TrimSpace(command) == "" {
				return usagef("--exec is empty; give the command to run for each job, e.g. --exec './handle-job.sh'")
			}
			// Checked here, before anything is opened: the worker
			// allocates per slot.
			if err := checkRange("--concurrency", concurrency, 1, queue.MaxConcurrency); err != nil {
				return err
			}
			if maxJobs < 0 {
				return usagef("--max-jobs %d must not be negative", maxJobs)
			}
			leaseD, err := parseDuration("--lease", lease)
			if err != nil {
				return err
			}
			if leaseD < queue.MinLease {
				return usagef("--lease %s must be at least %s", lease, shortDuration(queue.MinLease))
			}
			var runtimeD time.Duration
			if maxRuntime != "" {
				if runtimeD, err = parseDuration("--max-runtime", maxRuntime); err != nil {
					return err
				}
			}
			graceD, err := parseDuration("--grace", grace)
			if err != nil {
				return err
			}
			if graceD == 0 {
				// No grace: kill at once. WorkerConfig takes 0 as
				// "the default" (30s) and a negative timeout as none.
				graceD = -1
			}
			pollD, err := parseDuration("--poll-interval", pollInterval)
			if err != nil {
				return err
			}
			if pollD < time.Millisecond {
				return usagef("--poll-interval %s must be at least 1ms", pollInterval)
			}
			// The queue's limits on a job's type (README: "A job's
			// kind …, type (up to 64) …"), checked here so that a bad
			// --type is a usage error found before anything is opened,
			// as the queue would refuse it only once the worker starts
			// (a periodic job's name likewise, in parsePeriodic).
			for _, t := range types {
				if t == "" {
					return usagef("--type must not be empty")
				}
				if p := jobtext.Problem(t, jobtext.MaxType); p != "" {
					return usagef("--type %s", p)
				}
			}
			jobType := queue.DefaultType
			if len(types) > 0 {
				jobType = types[0]
			}
			periodicJobs, err := parsePeriodic(periodic, jobType)
			if err != nil {
				return err
			}
			if runMissed && len(periodicJobs) == 0 {
				return usagef("--run-missed needs --periodic: it enqueues the missed tick of the periodic jobs, and none is given")
			}
			var retentionD time.Duration
			if retention != "" {
				if retentionD, err = parseDuration("--retention", retention); err != nil {
					return err
				}
				if retentionD <= 0 {
					return usagef("--retention %s must be positive", retention)
				}
			}
			leaderLeaseD, err := parseDuration("--leader-lease", leaderLease)
			if err != nil {
				return err
			}
			if leaderLeaseD < queue.MinLeaderLease || leaderLeaseD > queue.MaxLeaderLease {
				return usagef("--leader-lease %s must be between %s and %s", leaderLease, shortDuration(queue.MinLeaderLease), shortDuration(queue.MaxLeaderLease))
			}
			maintenanceD, err := parseDuration("--maintenance-interval", maintenance)
			if err != nil {
				return err
			}
			if err := checkDurationRange("--maintenance-interval", maintenance, maintenanceD, minMaintenanceInterval, maxMaintenanceInterval); err != nil {
				return err
			}
			if metricsAddr != "" {
				if err := checkAddr("--metrics-addr", metricsAddr); err != nil {
					return err
				}
			}
			if err := checkPassEnv(passEnv); err != nil {
				return err
			}
			if err := checkCountLimit(countLimit); err != nil {
				return err
			}
			if countLimit != 0 && metricsAddr == "" {
				return usagef("--metrics-count-limit needs --metrics-addr (it bounds the counts /metrics serves)")
			}
			var level slog.Level
			if err := level.UnmarshalText([]byte(logLevel)); err != nil {
				return usagef("--log-level %q is not a level; use debug, info, warn or error", logLevel)
			}
			ctx := cmd.Context()
			log := a.logger(level)
			// The first signal ends ctx. Say so at once: the queue logs
			// its stop only once its running commands have had their
			// grace, which may be long.
			defer context.AfterFunc(ctx, func() {
				log.Info("signal received: worker stopping: claiming no more jobs; running commands get the grace to finish, a second signal ends them at once", "grace", grace)
			})()
			// As PID 1, reap the orphans of the commands.
			children, stopReaper := startReaper(log, "/proc")
			defer stopReaper()
			// The queue logs the worker's start and stop, failures and
			// warnings; completions it logs at debug, so the listener
			// reports them at info.
			opts := []queue.Option{queue.WithLogger(log), queue.WithListener(logCompleted(log))}
			var metrics *workMetrics
			if metricsAddr != "" {
				if metrics, err = newWorkMetrics(log); err != nil {
					return err
				}
				defer metrics.close()
				opts = append(opts, metrics.queueOptions...)
			}
			q, closeQueue, err := a.openQueue(ctx, opts...)
			if err != nil {
				if ctx.Err() != nil {
					// SIGINT or SIGTERM while connecting: a stop
					// asked for, not a database out of reach.
					log.Info("worker stopped before it started: signal received while connecting to the database")
					return nil
				}
				return err
			}
			defer closeQueue()
			if metrics != nil {
				if err := metrics.serve(q, metricsAddr, countLimit); err != nil {
					return err
				}
				defer metrics.stop()
			}
			w := q.NewWorker(queue.WorkerConfig{
				Types:           types,
				Concurrency:     concurrency,
				Lease:           leaseD,
				MaxJobs:         maxJobs,
				MaxRuntime:      runtimeD,
				ShutdownTimeout: graceD,
				PollInterval:    pollD,
				PollOnly:        pollOnly,

				MaintenanceInterval: maintenanceD,
				Retention:           retentionD,
				LeaderLease:         leaderLeaseD,
				Periodic:            periodicJobs,
				RunMissed:           runMissed,
			})
			runner := &execRunner{command: command, passEnv: passEnv, stdout: a.out, stderr: a.err, log: log, children: children}
			w.HandleDefault(func(ctx context.Context, job *queue.JobRow) error {
				return runner.run(ctx, execJob{
					ID: job.ID, Name: job.Name, Type: job.Type, Attempt: job.Attempts, Payload: job.Payload,
				})
			})
			// A second signal, during the grace the first gave: no
			// grace left.
			runDone := make(chan struct{})
			go func() {
				select {
				case <-a.hardStop:
					log.Warn("second signal: stopping at once: killing the running commands' process groups and releasing their jobs")
					w.StopNow()
				case <-runDone:
				}
			}()
			err = w.Run(ctx)
			close(runDone)
			if err != nil && !errors.Is(err, context.Canceled) {
				return explainTableError(err, q.Table())
			}
			return nil
		}),
	}
	f := cmd.Flags()
	f.StringArrayVar(&types, "type", nil, "claim jobs of this type (queue); repeat for several (default every type)")
	f.IntVar(&concurrency, "concurrency", 4, fmt.Sprintf("commands run at once, 1 to %d", queue.MaxConcurrency))
	f.StringVar(&lease, "lease", "5m", "how long a claimed job is held without a heartbeat, at least 1s; extended while the command runs")
	f.StringVar(&command, "exec", "", "shell command run for each job (required)")
	f.IntVar(&maxJobs, "max-jobs", 0, "claim this many jobs in all (each attempt of a retried job counts), let them finish, then stop (0: no limit)")
	f.StringVar(&maxRuntime, "max-runtime", "", "stop after running this long, as on SIGTERM (with --grace), e.g. 1h (0, the default: no limit)")
	f.StringVar(&logLevel, "log-level", "info", "log level on stderr: debug, info, warn or error")
	f.StringVar(&grace, "grace", "30s", "on SIGINT/SIGTERM/SIGHUP, how long running commands may finish before they are killed (0: killed at once; a second signal ends it)")
	f.StringVar(&pollInterval, "poll-interval", "1s", "how often an idle worker looks for due jobs (jittered); on PostgreSQL new jobs also wake it at once")
	f.BoolVar(&pollOnly, "poll-only", false, "do not LISTEN (PostgreSQL), wait (MySQL) or watch the file (SQLite) for new jobs, only poll (automatic behind PgBouncer with default_query_exec_mode=exec)")
	f.StringArrayVar(&periodic, "periodic", nil, "enqueue a job of kind NAME at each tick of SCHEDULE while this worker leads: 'NAME=SCHEDULE' (cron fields, @hourly…, @every DUR; CRON_TZ=ZONE prefix); repeatable")
	f.BoolVar(&runMissed, "run-missed", false, "on gaining the lead, enqueue the latest tick of each periodic job that passed while no worker led")
	f.StringVar(&retention, "retention", "", "the leader also prunes jobs that finished longer ago than this (e.g. 720h)")
	f.StringVar(&leaderLease, "leader-lease", "5s", "the leader's lease, 2s to 30m: a new leader takes over within it and a fifth of it after the leader dies")
	f.StringVar(&maintenance, "maintenance-interval", "30s", "how often the leader runs the maintenance (expire, reclaim, prune), 1s to 24h")
	f.StringVar(&metricsAddr, "metrics-addr", "", "serve /metrics (Prometheus text format) on this HOST:PORT while working, e.g. 127.0.0.1:9090")
	f.Int64Var(&countLimit, "metrics-count-limit", 0, countLimitFlag)
	f.StringArrayVar(&passEnv, "pass-env", nil, "give the commands this variable of the worker's environment, which they do not get otherwise since it may hold a password: JOBQUEUE_DB or JOBQUEUE_WEB_PASSWORD; repeatable")
	cmd.MarkFlagRequired("exec")
	return cmd
}

// The range of work --maintenance-interval. The Go API takes any positive
// WorkerConfig.MaintenanceInterval (its tests run it every 50 ms); from the
// command line, more often than once a second (MySQL keeps whole seconds)
// only loads the database, and less often than daily leaves abandoned jobs
// unreclaimed and overdue ones unexpired for more than a day.
const (
	minMaintenanceInterval = time.Second
	maxMaintenanceInterval = 24 * time.Hour
)

// logCompleted logs each completed job at info.
func logCompleted(log *slog.Logger) func(queue.Event) {
	return func(ev queue.Event) {
		if ev.Kind == queue.EventCompleted && ev.Job != nil {
			log.Info("job completed", "job_id", ev.Job.ID, "kind", ev.Job.Name, "type", ev.Job.Type,
				"attempt", ev.Job.Attempts, "duration", ev.Duration.Round(time.Millisecond))
		}
	}
}
