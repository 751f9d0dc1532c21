package testdb

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"
)

// QuietLogger is a logger that drops every record, for queues whose logs a
// test does not read.
func QuietLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

// LogRecorder is a slog handler that keeps every record, for tests that
// wait for, count or forbid what a queue logs: give it as
// slog.New(&LogRecorder{}). It is safe for concurrent use.
type LogRecorder struct {
	mu   sync.Mutex
	recs []slog.Record
}

// Enabled is true at every level: the tests choose when they read.
func (h *LogRecorder) Enabled(context.Context, slog.Level) bool { return true }

// Handle keeps r.
func (h *LogRecorder) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.recs = append(h.recs, r.Clone())
	return nil
}

// WithAttrs returns h itself: the attributes of the logger are not kept,
// only those of each record.
func (h *LogRecorder) WithAttrs([]slog.Attr) slog.Handler { return h }

// WithGroup returns h itself.
func (h *LogRecorder) WithGroup(string) slog.Handler { return h }

// Count is how many records at level min or above have a message that
// contains part, ignoring case.
func (h *LogRecorder) Count(min slog.Level, part string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, r := range h.recs {
		if r.Level >= min && strings.Contains(strings.ToLower(r.Message), strings.ToLower(part)) {
			n++
		}
	}
	return n
}

// Lines are the records at level min or above, in the order they were
// logged, each as its message followed by its attributes (key=value).
func (h *LogRecorder) Lines(min slog.Level) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for _, r := range h.recs {
		if r.Level < min {
			continue
		}
		var b strings.Builder
		b.WriteString(r.Message)
		r.Attrs(func(a slog.Attr) bool {
			fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
			return true
		})
		out = append(out, b.String())
	}
	return out
}

// Querier runs queries: a *sql.DB, *sql.Conn or *sql.Tx.
type Querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// Strings runs query (with args) on q and returns its single column, one
// string per row, in the order of the rows (an EXPLAIN's plan lines, the
// names of a catalog query). Any error of the query, of a row's scan (a
// NULL too) or of reading the rows fails t.
func Strings(t testing.TB, q Querier, query string, args ...any) []string {
	t.Helper()
	rows, err := q.QueryContext(context.Background(), query, args...)
	if err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatalf("%s: reading a row: %v", query, err)
		}
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("%s: reading the rows: %v", query, err)
	}
	if err := rows.Close(); err != nil {
		t.Fatalf("%s: closing the rows: %v", query, err)
	}
	return out
}

// MissingSeconds returns the whole seconds from the earliest of ats to the
// latest that none of ats is (the ticks an @every 1s periodic job did not
// get), with that earliest and latest. With no ats at all, the zero time
// is missing: no tick is a gap too.
func MissingSeconds(ats []time.Time) (missing []time.Time, first, last time.Time) {
	have := make(map[time.Time]bool, len(ats))
	for _, at := range ats {
		have[at] = true
		if first.IsZero() || at.Before(first) {
			first = at
		}
		if at.After(last) {
			last = at
		}
	}
	for at := first; !at.After(last); at = at.Add(time.Second) {
		if !have[at] {
			missing = append(missing, at)
		}
	}
	return missing, first, last
}
