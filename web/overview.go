package web

import (
	"context"
	"encoding/json"
	"time"

	"github.com/jobqueue/jobqueue/internal/jobjson"
	"github.com/jobqueue/jobqueue/queue"
)

// recentFailures is how many failed jobs the overview lists.
const recentFailures = 6

// overview is what the overview page shows. Every read behind it uses an
// index and stops early (queue.StatsUpTo, Types, OldestDue,
// RecentFailures), so it answers quickly on a table of millions of rows.
type overview struct {
	Now        time.Time
	CountLimit int64
	// Totals counts the jobs per status; Capped tells which totals are
	// lower bounds (a count behind them stopped at CountLimit).
	Totals map[queue.Status]int64
	Capped map[queue.Status]bool
	// Types has a row per type, in byte order; MoreTypes tells that there
	// were more than maxTypes.
	Types     []typeRow
	MoreTypes bool
	// OldestDue is the pending job due longest ago, nil when none is due.
	OldestDue *queue.JobRow
	Failures  []*queue.JobRow
}

// typeRow is one type's line of the overview.
type typeRow struct {
	Type      string
	Counts    map[queue.Status]int64
	OldestDue *queue.JobRow
}

// overview reads the overview. The totals are the sums of the types' rows
// when every type is shown (one count fewer per status), else counted on
// their own; either way a total is "capped" when a count behind it
// stopped at the limit.
func (h *handler) overview(ctx context.Context) (*overview, error) {
	ov := &overview{Now: time.Now().UTC(), CountLimit: h.opts.CountLimit,
		Totals: map[queue.Status]int64{}, Capped: map[queue.Status]bool{}}
	types, more, err := h.q.Types(ctx, maxTypes)
	if err != nil {
		return nil, err
	}
	ov.MoreTypes = more
	for _, t := range types {
		row := typeRow{Type: t}
		if row.Counts, err = h.q.StatsUpTo(ctx, t, h.opts.CountLimit); err != nil {
			return nil, err
		}
		if row.Counts[queue.StatusPending] > 0 {
			if row.OldestDue, err = h.q.OldestDue(ctx, t); err != nil {
				return nil, err
			}
		}
		for s, n := range row.Counts {
			ov.Totals[s] += n
			ov.Capped[s] = ov.Capped[s] || n >= h.opts.CountLimit
		}
		if row.OldestDue != nil && (ov.OldestDue == nil || dueBefore(row.OldestDue, ov.OldestDue)) {
			ov.OldestDue = row.OldestDue
		}
		ov.Types = append(ov.Types, row)
	}
	if more {
		if ov.Totals, err = h.q.StatsUpTo(ctx, "", h.opts.CountLimit); err != nil {
			return nil, err
		}
		for s, n := range ov.Totals {
			ov.Capped[s] = n >= h.opts.CountLimit
		}
		if ov.OldestDue, err = h.q.OldestDue(ctx, ""); err != nil {
			return nil, err
		}
	}
	if ov.Totals[queue.StatusFailed] > 0 {
		if ov.Failures, err = h.q.RecentFailures(ctx, recentFailures); err != nil {
			return nil, err
		}
	}
	return ov, nil
}

// dueBefore orders jobs as the oldest due job is chosen: by scheduled_at,
// then id.
func dueBefore(a, b *queue.JobRow) bool {
	if !a.ScheduledAt.Equal(b.ScheduledAt) {
		return a.ScheduledAt.Before(b.ScheduledAt)
	}
	return a.ID < b.ID
}

// overviewJSON is the answer of GET /api/overview.
type overviewJSON struct {
	CountLimit     int64         `json:"count_limit"`
	Totals         jobjson.Stats `json:"totals"`
	TotalsCapped   []string      `json:"totals_capped"`
	Types          []typeJSON    `json:"types"`
	MoreTypes      bool          `json:"more_types"`
	OldestDue      *oldestJSON   `json:"oldest_due"`
	RecentFailures []jobjson.Job `json:"recent_failures"`
	Now            string        `json:"now"`
}

type typeJSON struct {
	Type      string        `json:"type"`
	Counts    jobjson.Stats `json:"counts"`
	OldestDue *oldestJSON   `json:"oldest_due"`
}

// oldestJSON is the oldest due pending job: its id, when it was due and
// how long ago, in seconds.
type oldestJSON struct {
	ID          int64   `json:"id"`
	ScheduledAt string  `json:"scheduled_at"`
	AgeSeconds  float64 `json:"age_seconds"`
}

func (ov *overview) oldest(j *queue.JobRow) *oldestJSON {
	if j == nil {
		return nil
	}
	return &oldestJSON{ID: j.ID, ScheduledAt: jobjson.Time(j.ScheduledAt), AgeSeconds: ov.Now.Sub(j.ScheduledAt).Seconds()}
}

func (ov *overview) json(hidePayloads bool) overviewJSON {
	out := overviewJSON{
		CountLimit:     ov.CountLimit,
		Totals:         jobjson.Stats(ov.Totals),
		TotalsCapped:   []string{},
		Types:          make([]typeJSON, 0, len(ov.Types)),
		MoreTypes:      ov.MoreTypes,
		OldestDue:      ov.oldest(ov.OldestDue),
		RecentFailures: make([]jobjson.Job, 0, len(ov.Failures)),
		Now:            jobjson.Time(ov.Now),
	}
	for _, st := range queue.Statuses() {
		if ov.Capped[st] {
			out.TotalsCapped = append(out.TotalsCapped, string(st))
		}
	}
	for _, t := range ov.Types {
		out.Types = append(out.Types, typeJSON{Type: t.Type, Counts: jobjson.Stats(t.Counts), OldestDue: ov.oldest(t.OldestDue)})
	}
	for _, j := range ov.Failures {
		jj := jobjson.From(j)
		if hidePayloads {
			jj.Payload = json.RawMessage("null")
		}
		out.RecentFailures = append(out.RecentFailures, jj)
	}
	return out
}
