package queue

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/go-sql-driver/mysql"
)

// TestRetryTx: a transaction that fails only because of others (a MySQL
// deadlock, which is also how Galera reports a certification conflict) is
// run again, at most five times; any other error, or an ended context,
// returns at once.
func TestRetryTx(t *testing.T) {
	deadlock := fmt.Errorf("commit: %w", &mysql.MySQLError{Number: 1213, Message: "Deadlock found when trying to get lock"})
	other := &mysql.MySQLError{Number: 1062, Message: "Duplicate entry"}
	cases := []struct {
		name      string
		fails     []error // errors of the first tries; then nil
		cancelled bool
		wantCalls int
		wantErr   error
	}{
		{"success at once", nil, false, 1, nil},
		{"two deadlocks then success", []error{deadlock, deadlock}, false, 3, nil},
		{"deadlocks every time", []error{deadlock, deadlock, deadlock, deadlock, deadlock, deadlock}, false, 5, deadlock},
		{"another error is not retried", []error{other}, false, 1, other},
		{"a deadlock after the context ended", []error{deadlock, deadlock}, true, 1, deadlock},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if c.cancelled {
				cancel()
			}
			calls := 0
			err := retryTx(ctx, func() error {
				calls++
				if calls <= len(c.fails) {
					return c.fails[calls-1]
				}
				return nil
			})
			if calls != c.wantCalls {
				t.Errorf("tx ran %d times, want %d", calls, c.wantCalls)
			}
			if !errors.Is(err, c.wantErr) || (c.wantErr == nil) != (err == nil) {
				t.Errorf("retryTx = %v, want %v", err, c.wantErr)
			}
		})
	}
}
