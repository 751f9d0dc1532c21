package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/jobqueue/jobqueue/queue"
)

// benchDrainer runs the workers of bench's drain and latency phases.
type benchDrainer interface {
	// prepare gets the workers ready to claim (connected) without claiming.
	prepare(ctx context.Context) error
	// start lets them claim; the channel receives an error if a worker
	// stops before stop is called.
	start() <-chan error
	// stop stops the workers and waits for them; it may be called again.
	stop() error
}

// benchInProcess drains with one worker in this process.
type benchInProcess struct {
	q       *queue.Queue
	workers int
	c       *benchCounter

	ctx     context.Context
	cancel  context.CancelFunc
	runErr  chan error
	started bool
	once    sync.Once
	err     error
}

func (d *benchInProcess) prepare(ctx context.Context) error {
	d.ctx, d.cancel = context.WithCancel(ctx)
	d.runErr = make(chan error, 1)
	return nil
}

func (d *benchInProcess) start() <-chan error {
	w := d.q.NewWorker(queue.WorkerConfig{Concurrency: d.workers, Lease: time.Minute, ShutdownTimeout: 10 * time.Second})
	registerBenchHandlers(w, func(id int64, at time.Time, latency bool) { d.c.ran(id, at, latency) })
	d.started = true
	go func() { d.runErr <- w.Run(d.ctx) }()
	return d.runErr
}

func (d *benchInProcess) stop() error {
	d.once.Do(func() {
		d.cancel()
		if !d.started {
			return
		}
		select {
		case err := <-d.runErr:
			if err != nil && !errors.Is(err, context.Canceled) {
				d.err = err
			}
		case <-time.After(30 * time.Second):
			d.err = errors.New("the worker did not stop within 30s")
		}
	})
	return d.err
}

// registerBenchHandlers registers bench's two no-op handlers on w; ran hears
// each run with its start time.
func registerBenchHandlers(w *queue.Worker, ran func(id int64, at time.Time, latency bool)) {
	queue.Handle(w, func(ctx context.Context, job *queue.Job[benchNoop]) error {
		ran(job.ID, time.Now(), false)
		return nil
	})
	queue.Handle(w, func(ctx context.Context, job *queue.Job[benchLatency]) error {
		ran(job.ID, time.Now(), true)
		return nil
	})
}

// benchProcesses drains with n child processes of this binary running the
// hidden bench-worker command. They talk over pipes, one line per message:
// the child prints "ready" once connected, waits for "go" on its stdin,
// prints "done K" for K no-op jobs completed (up to benchLinesDelay late,
// one line for all completed meanwhile: benchLines) and "ran l ID UNIXNANO"
// as a latency job starts (at once), and stops when its stdin closes,
// printing "ran n ID" for each no-op job it ran before it exits (bench
// counts duplicates after the workers stopped, so the drain it times
// carries no line per job).
type benchProcesses struct {
	a       *app
	n       int
	workers int
	c       *benchCounter

	stdins  []io.WriteCloser
	exited  chan error // one per child, when it exits
	running sync.WaitGroup
	runErr  chan error
	once    sync.Once

	mu  sync.Mutex
	err error // of children that failed
}

func (d *benchProcesses) prepare(ctx context.Context) error {
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find this binary to start worker processes: %w", err)
	}
	d.exited = make(chan error, d.n)
	d.runErr = make(chan error, 1)
	ready := make(chan struct{}, d.n)
	for i := range d.n {
		args := []string{"--table", d.a.table}
		if d.a.pooled {
			args = append(args, "--transaction-pooling")
		}
		cmd := exec.CommandContext(ctx, self, append(args, "bench-worker", "--workers", strconv.Itoa(d.workers))...)
		// The URL goes in the environment: a password in it would show in ps.
		cmd.Env = append(os.Environ(), "JOBQUEUE_DB="+d.a.dbURL)
		if n, ok := childProcs(d.n); ok {
			cmd.Env = append(cmd.Env, "GOMAXPROCS="+strconv.Itoa(n))
		}
		cmd.Stderr = d.a.err
		cmd.WaitDelay = 10 * time.Second
		stdin, err := cmd.StdinPipe()
		if err != nil {
			return err
		}
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			return err
		}
		if err := cmd.Start(); err != nil {
			return fmt.Errorf("start worker process %d: %w", i+1, err)
		}
		d.stdins = append(d.stdins, stdin)
		d.running.Add(1)
		go func() {
			defer d.running.Done()
			readBenchLines(stdout, d.c, ready) // until the child's stdout closes
			err := cmd.Wait()
			d.mu.Lock()
			if err != nil {
				d.err = errors.Join(d.err, fmt.Errorf("worker process %d: %w", i+1, err))
			}
			d.mu.Unlock()
			d.exited <- err
		}()
	}
	for range d.n {
		select {
		case <-ready:
		case err := <-d.exited:
			return fmt.Errorf("a worker process exited before it was ready: %v", err)
		case <-time.After(time.Minute):
			return errors.New("the worker processes were not ready within a minute")
		}
	}
	return nil
}

// readBenchLines parses a bench-worker's messages (see benchProcesses)
// into c until r ends; "ready" goes to ready. A line it does not know is
// skipped.
func readBenchLines(r io.Reader, c *benchCounter, ready chan<- struct{}) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		switch {
		case len(f) == 1 && f[0] == "ready":
			ready <- struct{}{}
		case len(f) == 4 && f[0] == "ran" && f[1] == "l":
			id, err1 := strconv.ParseInt(f[2], 10, 64)
			ns, err2 := strconv.ParseInt(f[3], 10, 64)
			if err1 == nil && err2 == nil {
				c.ran(id, time.Unix(0, ns), true)
			}
		case len(f) == 3 && f[0] == "ran" && f[1] == "n":
			if id, err := strconv.ParseInt(f[2], 10, 64); err == nil {
				c.ran(id, time.Time{}, false)
			}
		case len(f) == 2 && f[0] == "done":
			if n, err := strconv.ParseInt(f[1], 10, 64); err == nil && n > 0 {
				c.drainedN(n)
			}
		}
	}
}

// childProcs is the GOMAXPROCS of each of n worker processes: its share of
// the machine's cores (at least 1), so that the n Go runtimes together run
// on as many threads as the one process of bench without --processes, and
// do not take the cores the database needs by spinning for work (measured
// with 4 processes on 2 cores: a quarter less CPU per job in the workers).
// ok is false when the user set GOMAXPROCS: the children inherit it.
func childProcs(n int) (procs int, ok bool) {
	if os.Getenv("GOMAXPROCS") != "" {
		return 0, false
	}
	return max(1, runtime.NumCPU()/n), true
}

func (d *benchProcesses) start() <-chan error {
	for _, in := range d.stdins {
		io.WriteString(in, "go\n")
	}
	go func() {
		if err := <-d.exited; err != nil {
			d.runErr <- fmt.Errorf("worker process: %v", err)
		} else {
			d.runErr <- errors.New("a worker process exited")
		}
	}()
	return d.runErr
}

func (d *benchProcesses) stop() error {
	d.once.Do(func() {
		for _, in := range d.stdins {
			in.Close()
		}
		d.running.Wait()
	})
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.err
}

// benchWorkerCommand is the hidden command that bench --processes starts.
func (a *app) benchWorkerCommand() *cobra.Command {
	var workers int
	cmd := &cobra.Command{
		Use:    "bench-worker --workers W",
		Short:  "A worker process of bench --processes (talks to bench over stdin/stdout)",
		Hidden: true,
		Args:   flagsOnly,
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			if err := checkRange("--workers", workers, 1, queue.MaxConcurrency); err != nil {
				return err
			}
			return a.benchWorker(cmd.Context(), workers)
		}),
	}
	cmd.Flags().IntVar(&workers, "workers", 0, "the worker's concurrency")
	return cmd
}

func (a *app) benchWorker(ctx context.Context, workers int) (err error) {
	lines := newBenchLines(a.out)
	defer func() { err = errors.Join(err, lines.close()) }()
	done := func(ev queue.Event) {
		if ev.Kind == queue.EventCompleted && ev.Job != nil && ev.Job.Name == (benchNoop{}).Kind() {
			lines.done()
		}
	}
	db, k, name, err := a.open(ctx)
	if err != nil {
		return err
	}
	defer db.Close()
	q, err := a.newQueue(ctx, db, name, queue.WithListener(done))
	if err != nil {
		return err
	}
	defer q.Close()
	if err := warmPool(ctx, db, k, name); err != nil {
		return err
	}
	in := bufio.NewScanner(a.in)
	lines.now("ready")
	if !in.Scan() || in.Text() != "go" {
		return errors.New("bench-worker: bench did not say go")
	}
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	go func() {
		for in.Scan() {
		}
		stop() // stdin closed: bench is done
	}()
	// The no-op jobs this process ran, told when it stops: bench needs them
	// only to count duplicates at its end.
	var ranMu sync.Mutex
	var ran []int64
	defer func() {
		ranMu.Lock()
		defer ranMu.Unlock()
		for _, id := range ran {
			lines.soon("ran n %d", id)
		}
	}()
	w := q.NewWorker(queue.WorkerConfig{Concurrency: workers, Lease: time.Minute, ShutdownTimeout: 10 * time.Second})
	registerBenchHandlers(w, func(id int64, at time.Time, latency bool) {
		if latency {
			lines.now("ran l %d %d", id, at.UnixNano()) // timed: at once
			return
		}
		ranMu.Lock()
		ran = append(ran, id)
		ranMu.Unlock()
	})
	if err := w.Run(runCtx); err != nil && !errors.Is(err, context.Canceled) {
		return explainTableError(err, name)
	}
	return nil
}
