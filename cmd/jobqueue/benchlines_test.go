package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestBenchLines: the drain's completions (done) reach the reader as
// counts without another line behind them, a line written soon goes out
// with the count gathered with it, a timed line (now) goes at once behind
// the lines waiting before it, in order, and close returns a failed write.
func TestBenchLines(t *testing.T) {
	r, w := io.Pipe()
	l := newBenchLines(w)
	got := make(chan string)
	stop := make(chan struct{})
	go func() { // bench's side: reads the lines, goes away when told
		defer close(got)
		in := bufio.NewScanner(r)
		for in.Scan() {
			select {
			case got <- in.Text():
			case <-stop:
				r.CloseWithError(errors.New("bench went away"))
				return
			}
		}
	}()
	read := func(want string) {
		t.Helper()
		if line := <-got; line != want {
			t.Fatalf("line %q, want %q", line, want)
		}
	}
	// Three completions: one count line or more (the flusher may write
	// between them), adding up to 3, written by the flusher alone.
	l.done()
	l.done()
	l.done()
	for sum := 0; sum < 3; {
		var n int
		line := <-got
		if _, err := fmt.Sscanf(line, "done %d", &n); err != nil || n < 1 {
			t.Fatalf("line %q, want done and a count", line)
		}
		sum += n
		if sum > 3 {
			t.Fatalf("counts add up to %d, want 3", sum)
		}
	}
	l.soon("ran n %d", 2)
	l.now("ran l %d %d", 3, 30)
	read("ran n 2")
	read("ran l 3 30")
	l.done()
	l.now("ran l %d %d", 4, 40) // a waiting count goes first
	read("done 1")
	read("ran l 4 40")
	close(stop)
	for i := 0; !l.failed(); i++ { // until a write finds bench gone
		l.now("ran l %d %d", 5, i)
	}
	if err := l.close(); err == nil {
		t.Fatal("close after a failed write returned nil")
	}
}

// TestReadBenchLines: bench's side of the pipe counts completions, runs and
// latency starts from a worker's lines, skips lines it does not know, and
// ends the drain when the counts reach its jobs.
func TestReadBenchLines(t *testing.T) {
	cases := []struct {
		name     string
		jobs     int
		lines    string
		drained  int64
		ended    bool
		runs     map[int64]int
		started  []int64
		readyFor int
	}{
		{"counts add up to the drain", 5, "ready\ndone 2\ndone 3\n", 5, true, map[int64]int{}, nil, 1},
		{"short of the drain", 5, "done 4\n", 4, false, map[int64]int{}, nil, 0},
		{"runs after the drain, a duplicate counted twice", 2, "done 2\nran n 7\nran n 8\nran n 7\n", 2, true, map[int64]int{7: 2, 8: 1}, nil, 0},
		{"latency starts with their time", 1, "ran l 9 1700000000000000000\ndone 1\n", 1, true, map[int64]int{9: 1}, []int64{9}, 0},
		{"unknown and broken lines skipped", 3, "hello\ndone x\ndone 0\ndone -2\nran n\nran n y\nran l 4\ndone 3\n", 3, true, map[int64]int{}, nil, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := newBenchCounter(tc.jobs, 1)
			ready := make(chan struct{}, 4)
			readBenchLines(strings.NewReader(tc.lines), c, ready)
			if got := c.drained.Load(); got != tc.drained {
				t.Errorf("drained %d, want %d", got, tc.drained)
			}
			ended := false
			select {
			case <-c.drainEnd:
				ended = true
			default:
			}
			if ended != tc.ended {
				t.Errorf("drain ended %v, want %v", ended, tc.ended)
			}
			if diff := cmp.Diff(tc.runs, c.runs); diff != "" {
				t.Errorf("runs (-want +got):\n%s", diff)
			}
			for _, id := range tc.started {
				if c.started[id].IsZero() {
					t.Errorf("latency job %d: no start time", id)
				}
			}
			if len(c.started) != len(tc.started) {
				t.Errorf("%d start times, want %d", len(c.started), len(tc.started))
			}
			if len(ready) != tc.readyFor {
				t.Errorf("%d ready, want %d", len(ready), tc.readyFor)
			}
		})
	}
}

// countingWriter counts the writes it is given.
type countingWriter struct{ writes atomic.Int64 }

func (w *countingWriter) Write(p []byte) (int, error) {
	w.writes.Add(1)
	return len(p), nil
}

// BenchmarkBenchLines: what a bench-worker tells bench during a drain, a
// completion per job as a worker process of bench --processes counts them;
// it reports the writes (system calls on bench's pipe) per job, well under
// 1 while the counts gather (benchLines), 1 if each went at once.
func BenchmarkBenchLines(b *testing.B) {
	w := &countingWriter{}
	l := newBenchLines(w)
	for range b.N {
		l.done()
	}
	if err := l.close(); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(w.writes.Load())/float64(b.N), "writes/job")
}
