package main

import (
	"bufio"
	"errors"
	"io"
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
