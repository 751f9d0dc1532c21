package engine

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

// TestExplainPooler: the errors of pgx's statement cache behind a
// transaction pooler say to add default_query_exec_mode=exec, once, and
// keep their cause; other errors are left as they are.
func TestExplainPooler(t *testing.T) {
	exists := &pgconn.PgError{Code: "42P05", Message: `prepared statement "stmtcache_ab12" already exists`}
	missing := &pgconn.PgError{Code: "26000", Message: `prepared statement "stmtcache_ab12" does not exist`}
	for _, c := range []struct {
		name    string
		err     error
		explain bool
	}{
		{"already exists", fmt.Errorf("checking table: %w", exists), true},
		{"does not exist", missing, true},
		{"a statement of the user's", &pgconn.PgError{Code: "42P05", Message: `prepared statement "mine" already exists`}, false},
		{"another error", &pgconn.PgError{Code: "42P01", Message: `relation "jobs" does not exist`}, false},
		{"not PostgreSQL", errors.New("stmtcache_ab12"), false},
		{"explained already", ExplainPooler(exists), true},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := ExplainPooler(c.err)
			if n := strings.Count(got.Error(), "default_query_exec_mode=exec"); n != map[bool]int{true: 1, false: 0}[c.explain] {
				t.Errorf("%q names the URL parameter %d times", got, n)
			}
			if !errors.Is(got, c.err) {
				t.Errorf("the cause is lost: %v", got)
			}
		})
	}
}

// TestExplainReadOnly: PostgreSQL's refusal of a write in a read-only
// transaction (SQLSTATE 25006: a standby, or default_transaction_read_only)
// says to connect to the primary and, with several hosts in the URL, to add
// target_session_attrs=read-write, once, and keeps its cause; other errors
// are left as they are.
func TestExplainReadOnly(t *testing.T) {
	readOnly := &pgconn.PgError{Code: "25006", Message: "cannot execute INSERT in a read-only transaction"}
	for _, c := range []struct {
		name    string
		err     error
		explain bool
	}{
		{"read-only", fmt.Errorf("enqueue: %w", readOnly), true},
		{"explained already", ExplainReadOnly(readOnly), true},
		{"another error", &pgconn.PgError{Code: "42P01", Message: `relation "jobs" does not exist`}, false},
		{"not PostgreSQL", errors.New("cannot execute INSERT in a read-only transaction"), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := ExplainReadOnly(c.err)
			if n := strings.Count(got.Error(), "target_session_attrs=read-write"); n != map[bool]int{true: 1, false: 0}[c.explain] {
				t.Errorf("%q names the URL parameter %d times", got, n)
			}
			if !errors.Is(got, c.err) {
				t.Errorf("the cause is lost: %v", got)
			}
		})
	}
	if ExplainReadOnly(nil) != nil {
		t.Error("ExplainReadOnly(nil) is not nil")
	}
}

// TestPooledURL: a postgres URL that sets no default_query_exec_mode gets
// default_query_exec_mode=exec (what pgx needs behind a transaction
// pooler), with the right separator; one that sets a mode keeps it, and
// other engines' URLs are left alone.
func TestPooledURL(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"postgres://u@h:6432/db", "postgres://u@h:6432/db?default_query_exec_mode=exec"},
		{"postgresql://u@h/db?sslmode=disable", "postgresql://u@h/db?sslmode=disable&default_query_exec_mode=exec"},
		{"POSTGRES://u@h1,h2/db?target_session_attrs=read-write&", "POSTGRES://u@h1,h2/db?target_session_attrs=read-write&default_query_exec_mode=exec"},
		{"postgres://u@h/db?", "postgres://u@h/db?default_query_exec_mode=exec"},
		{"postgres://u@h/db?default_query_exec_mode=simple_protocol", "postgres://u@h/db?default_query_exec_mode=simple_protocol"},
		{"postgres://u@h/db?default_query_exec_mode=cache_statement", "postgres://u@h/db?default_query_exec_mode=cache_statement"},
		{"mysql://root@h:3306/db", "mysql://root@h:3306/db"},
		{"sqlite:jobs.db", "sqlite:jobs.db"},
		{"postgres:nohost", "postgres:nohost"},
	} {
		t.Run(c.in, func(t *testing.T) {
			if got := PooledURL(c.in); got != c.want {
				t.Errorf("PooledURL(%q) = %q, want %q", c.in, got, c.want)
			}
		})
	}
}
