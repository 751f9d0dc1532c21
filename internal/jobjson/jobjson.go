// Package jobjson is a job as JSON, the one shape that `jobqueue show
// --json`, `jobqueue list --json` and the dashboard's API give: the keys are
// the table's column names, times are RFC 3339 in UTC or null, the delays
// are seconds as the table stores them, and the payload is JSON. Stats
// (stats.go) is likewise the one shape of the counts per status.
package jobjson

import (
	"encoding/json"
	"time"

	"github.com/jobqueue/jobqueue/queue"
)

// Job is one job as JSON: the columns of SPEC section 2 under their own
// names, times as RFC 3339 text in UTC, delays in whole seconds, and null
// for a column that is NULL in the table.
type Job struct {
	ID          int64           `json:"id"`
	Name        string          `json:"name"`
	Type        string          `json:"type"`
	Payload     json.RawMessage `json:"payload"`
	Status      string          `json:"status"`
	Attempts    int             `json:"attempts"`
	ClaimToken  *string         `json:"claim_token"`
	LeaseUntil  *string         `json:"lease_until"`
	MaxAttempts int             `json:"max_attempts"`
	BaseDelay   int64           `json:"base_delay"`
	MaxDelay    int64           `json:"max_delay"`
	Error       *string         `json:"error"`
	ScheduledAt string          `json:"scheduled_at"`
	ExpiresAt   *string         `json:"expires_at"`
	FinishedAt  *string         `json:"finished_at"`
	CreatedAt   string          `json:"created_at"`
}

// From converts a row. A payload that is not valid JSON is given as a JSON
// string of its text, so that the output is always valid JSON.
func From(j *queue.JobRow) Job {
	payload := j.Payload
	if !json.Valid(payload) {
		payload, _ = json.Marshal(string(j.Payload))
	}
	return Job{
		ID:          j.ID,
		Name:        j.Name,
		Type:        j.Type,
		Payload:     payload,
		Status:      string(j.Status),
		Attempts:    j.Attempts,
		ClaimToken:  nullString(j.ClaimToken),
		LeaseUntil:  nullTime(j.LeaseUntil),
		MaxAttempts: j.MaxAttempts,
		BaseDelay:   int64(j.BaseDelay / time.Second),
		MaxDelay:    int64(j.MaxDelay / time.Second),
		Error:       nullString(j.Error),
		ScheduledAt: Time(j.ScheduledAt),
		ExpiresAt:   nullTime(j.ExpiresAt),
		FinishedAt:  nullTime(j.FinishedAt),
		CreatedAt:   Time(j.CreatedAt),
	}
}

// Time formats t as RFC 3339 in UTC.
func Time(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

func nullTime(t *time.Time) *string {
	if t == nil {
		return nil
	}
	s := Time(*t)
	return &s
}

func nullString(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
