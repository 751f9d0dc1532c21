package queue

import (
	"fmt"
	"testing"
	"time"
)

// TestPgCopySourceRows: the rows pgCopySource gives COPY are each job's own
// values, in pgCopyColumns' order, whichever columns change from one job to
// the next (it keeps the boxed values of unchanged columns).
func TestPgCopySourceRows(t *testing.T) {
	now := time.Date(2030, 1, 2, 3, 4, 5, 6000, time.UTC)
	at := now.Add(time.Hour).In(time.FixedZone("east", 3600))
	exp1, exp2 := now.Add(2*time.Hour), now.Add(3*time.Hour)
	base := newJob{name: "a", typ: "default", payload: []byte(`{"n":1}`), maxAttempts: 3, baseDelay: 60, maxDelay: 3600, scheduledAt: now}
	with := func(f func(j *newJob)) *newJob { j := base; f(&j); return &j }
	jobs := []*newJob{
		with(func(*newJob) {}),
		with(func(j *newJob) { j.payload = []byte(`{"n":2}`) }),
		with(func(j *newJob) { j.name, j.typ = "b", "other" }),
		with(func(j *newJob) { j.maxDelay = 70 }),
		with(func(j *newJob) { j.scheduledAt, j.expiresAt = at, &exp1 }),
		with(func(j *newJob) { j.scheduledAt, j.expiresAt = at, &exp1 }),
		with(func(j *newJob) { j.expiresAt = &exp2 }),
		with(func(*newJob) {}),
		with(func(j *newJob) { j.maxAttempts = 9 }),
		with(func(j *newJob) { j.maxAttempts, j.baseDelay = 9, 7 }),
	}
	src := newPgCopySource(jobs, now.In(time.FixedZone("west", -7200)))
	for i, j := range jobs {
		if !src.Next() {
			t.Fatalf("Next is false at row %d of %d", i, len(jobs))
		}
		row, err := src.Values()
		if err != nil {
			t.Fatal(err)
		}
		var expires any
		if j.expiresAt != nil {
			expires = j.expiresAt.UTC()
		}
		want := []any{j.name, j.typ, j.payload, "pending", int32(0), int32(j.maxAttempts), int32(j.baseDelay),
			int32(j.maxDelay), j.scheduledAt.UTC(), expires, now}
		if len(row) != len(pgCopyColumns) {
			t.Fatalf("row %d has %d values, want %d (pgCopyColumns)", i, len(row), len(pgCopyColumns))
		}
		if g, w := fmt.Sprintf("%#v", row), fmt.Sprintf("%#v", want); g != w {
			t.Errorf("row %d:\n got %s\nwant %s", i, g, w)
		}
	}
	if src.Next() {
		t.Error("Next is true after the last job")
	}
}
