package main

import (
	"bufio"
	"errors"
	"io"
	"sync/atomic"
	"testing"
)

// TestBenchLines: the drain's lines (soon) reach the reader without another
// line behind them, a timed line (now) goes at once behind the lines
// waiting before it, in order, and close returns a failed write.
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
	l.soon("done %d", 1)
	read("done 1") // the flusher writes it: no line follows to push it
	l.soon("ran n %d %d", 2, 20)
	l.now("ran l %d %d", 3, 30)
	read("ran n 2 20")
	read("ran l 3 30")
	close(stop)
	for i := 0; !l.failed(); i++ { // until a write finds bench gone
		l.now("ran l %d %d", 5, i)
	}
	if err := l.close(); err == nil {
		t.Fatal("close after a failed write returned nil")
	}
}

// countingWriter counts the writes it is given.
type countingWriter struct{ writes atomic.Int64 }

func (w *countingWriter) Write(p []byte) (int, error) {
	w.writes.Add(1)
	return len(p), nil
}

// BenchmarkBenchLines: a bench-worker's drain lines, two per job as a
// worker process of bench --processes writes them; it reports the writes
// (system calls on bench's pipe) per line, well under 1 while the lines
// gather (benchLines), 1 if each went at once.
func BenchmarkBenchLines(b *testing.B) {
	w := &countingWriter{}
	l := newBenchLines(w)
	for i := range b.N {
		l.soon("ran n %d %d", i, 1700000000000000000+i)
		l.soon("done %d", i)
	}
	if err := l.close(); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(w.writes.Load())/float64(2*b.N), "writes/line")
}
