package queue

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jobqueue/jobqueue/internal/engine"
)

// TestNewContext: NewContext checks the table under the caller's context:
// a context already ended, or one whose deadline passes while the table is
// locked by another transaction, fails it with the context's error (New
// would wait its own 30 seconds), and a live one opens the queue.
func TestNewContext(t *testing.T) {
	forEachEngine(t, func(t *testing.T, kind engine.Kind) {
		env := newTestEnv(t, kind)
		cancelled, cancel := context.WithCancel(context.Background())
		cancel()
		type newCase struct {
			name    string
			ctx     func(t *testing.T) context.Context
			wantErr error
		}
		cases := []newCase{
			{"live context", func(t *testing.T) context.Context { return context.Background() }, nil},
			{"context already ended", func(t *testing.T) context.Context { return cancelled }, context.Canceled},
		}
		if kind == engine.Postgres {
			cases = append(cases, newCase{"deadline passes while the table is locked", func(t *testing.T) context.Context {
				tx, err := env.db.BeginTx(context.Background(), nil)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { tx.Rollback() })
				if _, err := tx.Exec("LOCK TABLE " + env.tbl.Quoted() + " IN ACCESS EXCLUSIVE MODE"); err != nil {
					t.Fatal(err)
				}
				ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
				t.Cleanup(cancel)
				return ctx
			}, context.DeadlineExceeded})
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				q, err := NewContext(c.ctx(t), env.newPool(t), WithTable(env.table))
				if err == nil {
					q.Close()
				}
				if !errors.Is(err, c.wantErr) || (c.wantErr == nil) != (err == nil) {
					t.Fatalf("NewContext: %v; want %v", err, c.wantErr)
				}
			})
		}
	})
}
