package main

import (
	"bufio"
	"fmt"
	"io"
	"sync"
	"time"
)

// benchLinesDelay is how long a bench-worker holds the lines of its drain
// ("ran n", "done") before it writes them to bench: short next to a drain,
// long enough that one write carries the lines of many jobs.
const benchLinesDelay = time.Millisecond

// benchLines writes a bench-worker's messages to bench, one line each.
// Lines that time something (ready, a latency job's start) are written at
// once. The drain's completions are counted, not written one by one: a
// "done K" line for the K no-op jobs completed since the last one goes out
// within benchLinesDelay of the first of them, with any other lines soon
// gathered meanwhile. Written one line per job and one write per line, the
// pipes cost the four worker processes of bench --processes 4 system calls
// and formatting per job, and bench reads, wake-ups and parsing: CPU the one
// process of bench without --processes does not spend, on the cores the
// database shares.
type benchLines struct {
	mu      sync.Mutex
	out     *bufio.Writer
	pending bool  // lines or a count of done wait for the flusher
	dones   int   // no-op jobs completed, not yet told
	err     error // the first write that failed
	kick    chan struct{}
	stopped chan struct{} // closed by close: the flusher returns
}

// newBenchLines writes lines to w; close stops its flusher.
func newBenchLines(w io.Writer) *benchLines {
	l := &benchLines{out: bufio.NewWriterSize(w, 64<<10), kick: make(chan struct{}, 1), stopped: make(chan struct{})}
	go l.flusher()
	return l
}

// now writes one line at once, with any lines waiting before it.
func (l *benchLines) now(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.writeDonesLocked()
	fmt.Fprintf(l.out, format+"\n", args...)
	l.flushLocked()
}

// done counts one completed no-op job, told within benchLinesDelay.
func (l *benchLines) done() {
	l.mu.Lock()
	l.dones++
	first := !l.pending
	l.pending = true
	l.mu.Unlock()
	if first {
		notify(l.kick)
	}
}

// soon writes one line within benchLinesDelay.
func (l *benchLines) soon(format string, args ...any) {
	l.mu.Lock()
	l.writeDonesLocked()
	fmt.Fprintf(l.out, format+"\n", args...)
	first := !l.pending
	l.pending = true
	l.mu.Unlock()
	if first {
		notify(l.kick)
	}
}

// writeDonesLocked writes the count of completions not yet told, if any,
// so that it goes before the lines written after them.
func (l *benchLines) writeDonesLocked() {
	if l.dones > 0 {
		fmt.Fprintf(l.out, "done %d\n", l.dones)
		l.dones = 0
	}
}

func (l *benchLines) flushLocked() {
	l.writeDonesLocked()
	if err := l.out.Flush(); err != nil && l.err == nil {
		l.err = err
	}
	l.pending = false
}

// flusher writes the waiting lines benchLinesDelay after the first of them.
func (l *benchLines) flusher() {
	for {
		select {
		case <-l.kick:
		case <-l.stopped:
			return
		}
		select {
		case <-time.After(benchLinesDelay):
		case <-l.stopped:
			return
		}
		l.mu.Lock()
		if l.pending {
			l.flushLocked()
		}
		l.mu.Unlock()
	}
}

// failed reports whether a write failed.
func (l *benchLines) failed() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err != nil
}

// close writes what waits, stops the flusher and returns the first write
// error.
func (l *benchLines) close() error {
	close(l.stopped)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.flushLocked()
	return l.err
}

// notify tells ch without blocking (a buffer of one: a burst is one notice).
func notify(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}
