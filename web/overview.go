package web

import (
	"context"
	"encoding/json"
	"time"

	"github.com/jobqueue/jobqueue/internal/jobjson"
	"github.com/jobqueue/jobqueue/queue"
)

// recentFailures is how many failed jobs the overview lists.
const recentFailures = 10

// overview is what the overview page shows. Every read behind it uses an
// index and stops early (queue.StatsUpTo, Types, OldestDue,
// RecentFailures), so it answers quickly on a table of millions of rows.
type overview struct {
	Now        time.Time
	CountLimit int64
	// Totals counts the jobs per status, each count stopping at CountLimit.
	Totals map[queue.Status]int64
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

// overview reads the overview.
func (h *handler) overview(ctx context.Context) (*overview, error) {
	ov := &overview{Now: time.Now().UTC(), CountLimit: h.opts.CountLimit}
	var err error
	if ov.Totals, err = h.q.StatsUpTo(ctx, "", h.opts.CountLimit); err != nil {
		return nil, err
	}
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
		ov.Types = append(ov.Types, row)
	}
	if ov.Totals[queue.StatusPending] > 0 {
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

// overviewJSON is the answer of GET /api/overview.
type overviewJSON struct {
	CountLimit     int64         `json:"count_limit"`
	Totals         statsJSON     `json:"totals"`
	Types          []typeJSON    `json:"types"`
	MoreTypes      bool          `json:"more_types"`
	OldestDue      *oldestJSON   `json:"oldest_due"`
	RecentFailures []jobjson.Job `json:"recent_failures"`
	Now            string        `json:"now"`
}

type typeJSON struct {
	Type      string      `json:"type"`
	Counts    statsJSON   `json:"counts"`
	OldestDue *oldestJSON `json:"oldest_due"`
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
		Totals:         toStatsJSON(ov.Totals),
		Types:          make([]typeJSON, 0, len(ov.Types)),
		MoreTypes:      ov.MoreTypes,
		OldestDue:      ov.oldest(ov.OldestDue),
		RecentFailures: make([]jobjson.Job, 0, len(ov.Failures)),
		Now:            jobjson.Time(ov.Now),
	}
	for _, t := range ov.Types {
		out.Types = append(out.Types, typeJSON{Type: t.Type, Counts: toStatsJSON(t.Counts), OldestDue: ov.oldest(t.OldestDue)})
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
