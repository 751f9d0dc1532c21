package queue

import (
	"database/sql"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/jobqueue/jobqueue/db/mysqlgen"
	"github.com/jobqueue/jobqueue/db/pggen"
	"github.com/jobqueue/jobqueue/db/sqlitegen"
)

// TestJobRowOfEachEngine: jobRow maps the Job model of each engine, with
// the same values in its own types, to the same JobRow (times read as UTC
// whatever their location, nullable columns nil or set).
func TestJobRowOfEachEngine(t *testing.T) {
	local := time.FixedZone("here", 2*3600)
	at := time.Date(2030, 1, 2, 3, 4, 5, 6000, local)
	utc := time.Date(2030, 1, 2, 3, 4, 5, 6000, time.UTC) // the wall clock, read as UTC
	lease := sql.NullTime{Time: at, Valid: true}
	want := &JobRow{
		ID: 42, Name: "n", Type: "t", Payload: json.RawMessage(`{"a":1}`), Status: StatusInProgress,
		Attempts: 2, ClaimToken: "tok", LeaseUntil: &utc, MaxAttempts: 5,
		BaseDelay: 30 * time.Second, MaxDelay: time.Hour, Error: "e",
		ScheduledAt: utc, ExpiresAt: nil, FinishedAt: nil, CreatedAt: utc,
	}
	cases := []struct {
		engine string
		row    func() *JobRow
	}{
		{"postgres", func() *JobRow {
			return jobRow(pggen.Job{
				ID: 42, Name: "n", Type: "t", Payload: json.RawMessage(`{"a":1}`), Status: "in_progress",
				Attempts: 2, ClaimToken: sql.NullString{String: "tok", Valid: true}, LeaseUntil: lease, MaxAttempts: 5,
				BaseDelay: 30, MaxDelay: 3600, Error: sql.NullString{String: "e", Valid: true},
				ScheduledAt: at, CreatedAt: at,
			})
		}},
		{"mysql", func() *JobRow {
			return jobRow(mysqlgen.Job{
				ID: 42, Name: "n", Type: "t", Payload: json.RawMessage(`{"a":1}`), Status: mysqlgen.JobsStatusInProgress,
				Attempts: 2, ClaimToken: sql.NullString{String: "tok", Valid: true}, LeaseUntil: lease, MaxAttempts: 5,
				BaseDelay: 30, MaxDelay: 3600, Error: sql.NullString{String: "e", Valid: true},
				ScheduledAt: at, CreatedAt: at,
			})
		}},
		{"sqlite", func() *JobRow {
			return jobRow(sqlitegen.Job{
				ID: 42, Name: "n", Type: "t", Payload: `{"a":1}`, Status: "in_progress",
				Attempts: 2, ClaimToken: sql.NullString{String: "tok", Valid: true}, LeaseUntil: lease, MaxAttempts: 5,
				BaseDelay: 30, MaxDelay: 3600, Error: sql.NullString{String: "e", Valid: true},
				ScheduledAt: at, CreatedAt: at,
			})
		}},
	}
	for _, c := range cases {
		t.Run(c.engine, func(t *testing.T) {
			if got := c.row(); !reflect.DeepEqual(got, want) {
				t.Errorf("jobRow =\n%+v\nwant\n%+v", got, want)
			}
		})
	}
}

// TestFirstOf: the first row of a result, found only when there is one
// and no error.
func TestFirstOf(t *testing.T) {
	boom := errors.New("boom")
	cases := []struct {
		name      string
		rows      []int64
		err       error
		want      int64
		wantFound bool
	}{
		{"none", nil, nil, 0, false},
		{"one", []int64{7}, nil, 7, true},
		{"several", []int64{7, 8}, nil, 7, true},
		{"error", []int64{7}, boom, 0, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, found, err := firstOf(c.rows, c.err)
			if got != c.want || found != c.wantFound || err != c.err {
				t.Errorf("firstOf(%v, %v) = %d, %v, %v; want %d, %v, %v", c.rows, c.err, got, found, err, c.want, c.wantFound, c.err)
			}
		})
	}
}

// TestCountsByStatus: each engine's CountByStatus rows become counts by
// status; the map is there, empty, also on an error.
func TestCountsByStatus(t *testing.T) {
	boom := errors.New("boom")
	pg, err := countsByStatus([]pggen.CountByStatusRow{{Status: "pending", N: 3}, {Status: "failed", N: 1}}, nil)
	if want := map[Status]int64{StatusPending: 3, StatusFailed: 1}; err != nil || !reflect.DeepEqual(pg, want) {
		t.Errorf("postgres: %v, %v; want %v", pg, err, want)
	}
	my, err := countsByStatus([]mysqlgen.CountByStatusOfTypeRow{{Status: mysqlgen.JobsStatusCompleted, N: 2}}, nil)
	if want := map[Status]int64{StatusCompleted: 2}; err != nil || !reflect.DeepEqual(my, want) {
		t.Errorf("mysql: %v, %v; want %v", my, err, want)
	}
	lite, err := countsByStatus([]sqlitegen.CountByStatusRow(nil), boom)
	if lite == nil || len(lite) != 0 || err != boom {
		t.Errorf("sqlite, failed: %v (nil %v), %v; want an empty map and the error", lite, lite == nil, err)
	}
}

// TestLeaderRowOf: a GetLeader row of each engine, its times as UTC and
// the server's time read by the engine's reader; no row is nil, nil; an
// error, or a server time that cannot be read, is returned.
func TestLeaderRowOf(t *testing.T) {
	at := time.Date(2030, 1, 2, 3, 4, 5, 0, time.FixedZone("here", 3600))
	utc := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	now := time.Date(2030, 1, 2, 3, 4, 6, 500e6, time.UTC)
	want := &leaderRow{holder: "h", term: 3, since: utc, renewedAt: utc, leaseUntil: utc, dbNow: now}
	boom := errors.New("boom")
	cases := []struct {
		name    string
		read    func() (*leaderRow, error)
		want    *leaderRow
		wantErr string // "": none
	}{
		{"postgres", func() (*leaderRow, error) {
			return leaderRowOf(pggen.GetLeaderRow{Holder: "h", Term: 3, Since: at, RenewedAt: at, LeaseUntil: at, DbNow: now}, nil, serverTime)
		}, want, ""},
		{"mysql", func() (*leaderRow, error) {
			return leaderRowOf(mysqlgen.GetLeaderRow{Holder: "h", Term: 3, Since: at, RenewedAt: at, LeaseUntil: at, DbNow: now}, nil, serverTime)
		}, want, ""},
		{"sqlite", func() (*leaderRow, error) {
			return leaderRowOf(sqlitegen.GetLeaderRow{Holder: "h", Term: 3, Since: at, RenewedAt: at, LeaseUntil: at, DbNow: "2030-01-02 03:04:06.500"}, nil, sqliteServerTime)
		}, want, ""},
		{"no row", func() (*leaderRow, error) {
			return leaderRowOf(pggen.GetLeaderRow{}, sql.ErrNoRows, serverTime)
		}, nil, ""},
		{"error", func() (*leaderRow, error) {
			return leaderRowOf(mysqlgen.GetLeaderRow{}, boom, serverTime)
		}, nil, "boom"},
		{"sqlite time unreadable", func() (*leaderRow, error) {
			return leaderRowOf(sqlitegen.GetLeaderRow{Holder: "h", DbNow: 17}, nil, sqliteServerTime)
		}, nil, "reading SQLite's time 17"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := c.read()
			switch {
			case c.wantErr == "" && err != nil:
				t.Fatalf("error %v, want none", err)
			case c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)):
				t.Fatalf("error %v, want one saying %q", err, c.wantErr)
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("leader row %+v, want %+v", got, c.want)
			}
		})
	}
}
