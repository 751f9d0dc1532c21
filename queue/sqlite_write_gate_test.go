package queue

// Tests of the SQLite write gate (writeGated, store_sqlite.go): one write at
// a time, and a wait for it that ends with its context.

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestSQLiteWriteGate(t *testing.T) {
	t.Run("a write waiting for the gate ends with its context", func(t *testing.T) {
		s := sqliteStore{r: &runner{writer: make(chan struct{}, 1)}}
		s.r.writer <- struct{}{} // another write holds the gate
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		ran := false
		_, err := writeGated(ctx, s, func() (int, error) { ran = true; return 1, nil })
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("writeGated with the gate held: err %v, want context.DeadlineExceeded", err)
		}
		if ran {
			t.Fatal("writeGated ran the write while another held the gate")
		}
	})
	t.Run("the gate is held during the write and free after it", func(t *testing.T) {
		s := sqliteStore{r: &runner{writer: make(chan struct{}, 1)}}
		held := false
		v, err := writeGated(context.Background(), s, func() (int, error) {
			held = len(s.r.writer) == 1
			return 7, nil
		})
		if err != nil || v != 7 {
			t.Fatalf("writeGated: %v, %v; want 7, nil", v, err)
		}
		if !held {
			t.Fatal("the gate was free while the write ran")
		}
		if len(s.r.writer) != 0 {
			t.Fatal("the gate is still held after the write returned")
		}
	})
}
