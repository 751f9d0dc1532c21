package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
	"github.com/spf13/cobra"

	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/queue"
)

// Exit statuses.
const (
	exitOK      = 0
	exitFailure = 1
	exitUsage   = 2
)

// defaultDB is the database used when neither --db nor $JOBQUEUE_DB is set.
const defaultDB = "sqlite:jobqueue.db"

// streams are the standard streams a command uses.
type streams struct {
	in  io.Reader
	out io.Writer
	err io.Writer
}

// app holds the global flags and the streams shared by every command.
type app struct {
	streams
	dbURL string
	table string
	// dbSet and tableSet tell whether the user gave --db or --table.
	dbSet, tableSet bool
	// pooled: --transaction-pooling, the connections go through a
	// transaction pooler (queue.WithTransactionPooling).
	pooled bool
	// hardStop is closed by a second SIGINT, SIGTERM or SIGHUP (the first
	// ends the command's context): work then stops at once, with no grace
	// left, and web closes its connections without waiting for the requests
	// in flight. Nil (never closed) when run has no such signal.
	hardStop <-chan struct{}
}

// usageError is a mistake in how the command was called (exit status 2).
type usageError struct{ err error }

// Error is the text of the mistake.
func (e *usageError) Error() string { return e.err.Error() }

// Unwrap gives the error inside, for errors.Is and errors.As.
func (e *usageError) Unwrap() error { return e.err }

// usagef returns a usage error (exit status 2).
func usagef(format string, args ...any) error {
	return &usageError{err: fmt.Errorf(format, args...)}
}

// checkRange refuses n, given to the flag flag, unless it is between lo and
// hi: a usage error naming the flag and the range.
func checkRange(flag string, n, lo, hi int) error {
	if n < lo || n > hi {
		return usagef("%s %d is out of range; use %d to %d", flag, n, lo, hi)
	}
	return nil
}

// checkDurationRange refuses d, given to the flag flag as s, unless it is
// between lo and hi, in checkRange's words.
func checkDurationRange(flag, s string, d, lo, hi time.Duration) error {
	if d < lo || d > hi {
		return usagef("%s %s is out of range; use %s to %s", flag, s, shortDuration(lo), shortDuration(hi))
	}
	return nil
}

// shortDuration is d as a flag takes it, in its largest whole unit (24h,
// 30m, 2s), else as time.Duration writes it.
func shortDuration(d time.Duration) string {
	for _, u := range []struct {
		d    time.Duration
		name string
	}{{time.Hour, "h"}, {time.Minute, "m"}, {time.Second, "s"}, {time.Millisecond, "ms"}} {
		if d != 0 && d%u.d == 0 {
			return fmt.Sprintf("%d%s", d/u.d, u.name)
		}
	}
	return d.String()
}

// failure is an error of a command that was called correctly (exit status 1).
type failure struct{ err error }

// Error is the text of the failure.
func (e *failure) Error() string { return e.err.Error() }

// Unwrap gives the error inside, for errors.Is and errors.As.
func (e *failure) Unwrap() error { return e.err }

// run runs the command line args and returns the exit status. ctx ends
// at the first stop signal, hardStop closes at the second.
func run(ctx context.Context, hardStop <-chan struct{}, args []string, s streams) int {
	out := &outputWriter{w: s.out}
	s.out = out
	a := &app{streams: s, hardStop: hardStop}
	root := a.rootCommand()
	root.SetArgs(args)
	root.SetIn(s.in)
	root.SetOut(s.out)
	root.SetErr(s.err)
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		if werr := out.firstErr(); werr != nil {
			// The command did its work, but what it printed was lost.
			fmt.Fprintf(s.err, "jobqueue: the command's output could not be written: %v\n", werr)
			return exitFailure
		}
		return exitOK
	}
	code := exitUsage // errors cobra finds itself: unknown command or flag, bad value, missing flag
	var f *failure
	if errors.As(err, &f) {
		code = exitFailure
	}
	var u *usageError
	if errors.As(err, &u) {
		code = exitUsage
	}
	if code == exitFailure && ctx.Err() != nil {
		err = stoppedBySignal(err)
	}
	// The URL may hold a password, and some errors quote it.
	line := engine.RedactURL(engine.RedactURL(oneLine(engine.ExplainReadOnly(engine.ExplainPooler(err)), code, cmd), a.dbURL), os.Getenv("JOBQUEUE_DB"))
	fmt.Fprintln(s.err, line)
	return code
}

// outputWriter passes writes on to w and keeps the first error, so that a
// command whose output could not be written (stdout on a full disk, a
// closed pipe) fails, also where the command did not check a write.
type outputWriter struct {
	w   io.Writer
	mu  sync.Mutex
	err error
}

func (o *outputWriter) Write(p []byte) (int, error) {
	n, err := o.w.Write(p)
	if err != nil {
		o.mu.Lock()
		if o.err == nil {
			o.err = err
		}
		o.mu.Unlock()
	}
	return n, err
}

// firstErr is the first write error, or nil.
func (o *outputWriter) firstErr() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.err
}

// oneLine formats err, returned by cmd, as the single line printed on
// stderr (see errorText); a usage error points to the command's help.
func oneLine(err error, code int, cmd *cobra.Command) string {
	msg := errorText(err)
	if code == exitUsage && !strings.Contains(msg, "--help") {
		path := "jobqueue"
		if cmd != nil {
			path = cmd.CommandPath()
		}
		msg += "; see '" + path + " --help'"
	}
	return "jobqueue: " + msg
}

// errorText is the text of err on one line without the "jobqueue: "
// prefixes of the queue's errors, at its start and where a step of the
// command wraps one ("empty the demo table x: jobqueue: purge: …"), so that
// the line printed after one "jobqueue: " says it once.
func errorText(err error) string {
	msg := strings.Join(strings.Fields(err.Error()), " ")
	for strings.HasPrefix(msg, "jobqueue: ") {
		msg = strings.TrimPrefix(msg, "jobqueue: ")
	}
	for strings.Contains(msg, ": jobqueue: ") {
		msg = strings.ReplaceAll(msg, ": jobqueue: ", ": ")
	}
	return msg
}

func (a *app) rootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "jobqueue",
		Short: "Operate a jobqueue table on PostgreSQL, MySQL/MariaDB or SQLite",
		Long: `jobqueue installs, migrates, inspects and operates a jobqueue table, runs jobs
through any program (work --exec), shows the life of jobs (demo) and measures
a database (bench).

The database is --db URL, else $JOBQUEUE_DB, else ` + defaultDB + `. URLs:
  postgres://user:pass@host:5432/db?sslmode=disable   (also postgresql://)
  mysql://user:pass@host:3306/db                      (also mariadb://)
  sqlite:PATH or sqlite://PATH     (options: ?_pragma=foreign_keys(1)&_busy_timeout=5000)
Behind PgBouncer in transaction pooling mode add default_query_exec_mode=exec
to the postgres URL, or pass --transaction-pooling (which adds it); behind
ProxySQL's multiplexing (MySQL) pass --transaction-pooling to every command.

Exit status: 0 on success, 1 on failure, 2 on bad usage.`,
		SilenceErrors: true,
		SilenceUsage:  true,
		// Called with no command, or an unknown one: a usage error.
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return usagef("no command given; run 'jobqueue --help' for the list")
		},
		PersistentPreRunE: func(cmd *cobra.Command, args []string) error {
			a.dbSet = cmd.Flags().Changed("db")
			a.tableSet = cmd.Flags().Changed("table")
			if !a.dbSet {
				a.dbURL = defaultDB
				if v := os.Getenv("JOBQUEUE_DB"); v != "" {
					a.dbURL = v
				}
			}
			return nil
		},
	}
	root.PersistentFlags().StringVar(&a.dbURL, "db", "", "database URL (default $JOBQUEUE_DB, else "+defaultDB+")")
	root.PersistentFlags().StringVar(&a.table, "table", "jobs", "table name")
	root.PersistentFlags().BoolVar(&a.pooled, "transaction-pooling", false, "the connections go through a transaction pooler (ProxySQL's multiplexing, PgBouncer in transaction mode): prepare no statements, workers poll only, enqueues interrupt no worker's wait (on PostgreSQL it adds default_query_exec_mode=exec to a URL that sets no mode; that parameter in the URL says so too)")
	root.SetFlagErrorFunc(flagError)
	root.CompletionOptions.DisableDefaultCmd = true
	root.AddCommand(
		a.installCommand(),
		a.migrateCommand(),
		a.uninstallCommand(),
		a.enqueueCommand(),
		a.statsCommand(),
		a.listCommand(),
		a.showCommand(),
		a.retryCommand(),
		a.cancelCommand(),
		a.deleteCommand(),
		a.expireCommand(),
		a.reclaimCommand(),
		a.pruneCommand(),
		a.workCommand(),
		a.leaderCommand(),
		a.demoCommand(),
		a.benchCommand(),
		a.webCommand(),
		a.benchWorkerCommand(),
		a.gooseFileCommand(),
	)
	return root
}

// runE wraps a command's function so that its errors are failures (exit
// status 1) unless they are usage errors.
func runE(fn func(cmd *cobra.Command, args []string) error) func(cmd *cobra.Command, args []string) error {
	return func(cmd *cobra.Command, args []string) error {
		err := fn(cmd, args)
		if err == nil {
			return nil
		}
		var u *usageError
		if errors.As(err, &u) {
			return err
		}
		return &failure{err: err}
	}
}

// workerConns is about as many connections as a worker uses at once (its
// claim session, the LISTEN connection, the completer's writes, the
// leader's and the heartbeats' statements): every command's pool keeps as
// many idle (app.open), and bench's workers open them all before the
// drain's clock starts (warmPool).
const workerConns = 6

// open checks --db and --table and opens the database; it returns the
// engine and the table name as the engine stores it. A bad URL or table name
// is a usage error (found before connecting), an unreachable server a
// failure.
func (a *app) open(ctx context.Context) (*sql.DB, engine.Kind, string, error) {
	dbURL := a.dbURL
	if a.pooled {
		// pgx prepares no statement in the pooler's server sessions.
		dbURL = engine.PooledURL(dbURL)
	}
	driver, dsn, k, err := engine.DriverDSN(dbURL)
	if err != nil {
		return nil, "", "", &usageError{err: err}
	}
	if err := checkDSN(driver, dsn); err != nil {
		return nil, "", "", usagef("bad option in the --db URL: %v; correct or remove it", err)
	}
	t, err := engine.ParseTable(k, a.table)
	if err != nil {
		return nil, "", "", &usageError{err: err}
	}
	db, k, err := engine.Open(ctx, dbURL)
	if err != nil {
		return nil, "", "", err
	}
	// database/sql keeps 2 idle connections by default; a worker uses
	// about workerConns at once, so with 2 it closed and opened connections
	// all through a busy spell (a server backend started per reopen).
	db.SetMaxIdleConns(workerConns)
	return db, k, t.Name, nil
}

// checkDSN parses dsn as the driver will, so that a bad option in the URL
// (sslmode=bogus, timeout=soon) is found before connecting, as the usage
// error it is, rather than reported as an unreachable server.
func checkDSN(driver, dsn string) error {
	var err error
	switch driver {
	case "pgx":
		// pgx's own options (default_query_exec_mode,
		// statement_cache_capacity…) too, not only libpq's.
		_, err = pgx.ParseConfig(dsn)
	case "mysql":
		_, err = mysql.ParseDSN(dsn)
	}
	return err
}

// openQueue opens the database and the queue on --table, logging warnings
// and errors to stderr; opts come after those defaults. The returned func
// closes both.
func (a *app) openQueue(ctx context.Context, opts ...queue.Option) (*queue.Queue, func(), error) {
	db, _, name, err := a.open(ctx)
	if err != nil {
		return nil, nil, err
	}
	q, err := a.newQueue(ctx, db, name, opts...)
	if err != nil {
		db.Close()
		return nil, nil, err
	}
	return q, func() { q.Close(); db.Close() }, nil
}

// withQueue opens the queue on --table (see openQueue), runs fn with it and
// closes it; an error of fn about the table says what to do next.
func (a *app) withQueue(ctx context.Context, fn func(q *queue.Queue) error, opts ...queue.Option) error {
	q, closeQueue, err := a.openQueue(ctx, opts...)
	if err != nil {
		return err
	}
	defer closeQueue()
	if err := fn(q); err != nil {
		return explainTableError(err, q.Table())
	}
	return nil
}

// newQueue is queue.New on db for every command: table name, warnings and
// errors logged on stderr, and --transaction-pooling (without it, no
// option: New detects a PostgreSQL pooler from the URL); opts come last and
// so override these. An error about the table says what to do next.
func (a *app) newQueue(ctx context.Context, db *sql.DB, name string, opts ...queue.Option) (*queue.Queue, error) {
	all := []queue.Option{queue.WithTable(name), queue.WithLogger(a.logger(slog.LevelWarn))}
	if a.pooled {
		all = append(all, queue.WithTransactionPooling(true))
	}
	q, err := queue.NewContext(ctx, db, append(all, opts...)...)
	if err != nil {
		return nil, explainTableError(err, name)
	}
	return q, nil
}

// logger is a text logger on stderr at the given level.
func (a *app) logger(level slog.Level) *slog.Logger {
	return slog.New(slog.NewTextHandler(a.err, &slog.HandlerOptions{Level: level}))
}

// explainTableError adds what to do next to errors about the table.
func explainTableError(err error, table string) error {
	switch {
	case errors.Is(err, queue.ErrSideTableMissing):
		return err // it names the side table and says to run jobqueue install
	case errors.Is(err, queue.ErrTableMissing):
		return fmt.Errorf("%w: there is no table %s in this database; create it with 'jobqueue install --table %s' (or pick the right one with --db and --table)", queue.ErrTableMissing, table, table)
	case errors.Is(err, engine.ErrSideNameTaken):
		return err // it names the side table's name and what holds it
	case errors.Is(err, engine.ErrViewName):
		return err // it says the name is a view's and to name the table
	case errors.Is(err, engine.ErrForeignTable):
		// Not a table to migrate (migrate refuses it): another program's.
		return fmt.Errorf("%w: table %s in this database is not a jobqueue table (another program's table has that name; jobqueue leaves it alone); choose another name with --table, and create that table with 'jobqueue install --table NAME'", engine.ErrForeignTable, table)
	case errors.Is(err, engine.ErrOutdatedTable):
		// The library's text names the Go API; say it for the command line.
		return fmt.Errorf("%w: table %s is a version 1 (or partly migrated) table; stop everything that uses it, back it up, then convert it once with 'jobqueue migrate --table %s --max-attempts N --base-delay SECS --max-delay SECS' (see docs/upgrading.md)", engine.ErrOutdatedTable, table, table)
	case errors.Is(err, engine.ErrInvalidTableName):
		return &usageError{err: err}
	}
	return err
}
