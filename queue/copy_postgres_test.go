package queue

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"testing"
	"testing/iotest"
	"time"

	"github.com/jobqueue/jobqueue/internal/engine"
)

// decodePgCopy reads binary COPY data back into rows of field values (nil
// for NULL), checking the header and the trailer.
func decodePgCopy(t *testing.T, data []byte) [][][]byte {
	t.Helper()
	header := "PGCOPY\n\377\r\n\000\x00\x00\x00\x00\x00\x00\x00\x00"
	if !bytes.HasPrefix(data, []byte(header)) {
		t.Fatalf("no COPY header: % x", data[:min(len(data), 19)])
	}
	data = data[len(header):]
	var rows [][][]byte
	for {
		if len(data) < 2 {
			t.Fatalf("the data ends without a trailer after %d rows", len(rows))
		}
		n := int16(binary.BigEndian.Uint16(data))
		data = data[2:]
		if n == -1 {
			if len(data) != 0 {
				t.Fatalf("%d bytes after the trailer", len(data))
			}
			return rows
		}
		row := make([][]byte, n)
		for i := range row {
			l := int32(binary.BigEndian.Uint32(data))
			data = data[4:]
			if l >= 0 {
				row[i], data = data[:l], data[l:]
			}
		}
		rows = append(rows, row)
	}
}

// TestPgCopyReaderRows: the rows pgCopyReader encodes hold each job's own
// values in pgCopyColumns' order, in binary COPY's format (jsonb with its
// version byte, int4, timestamps in microseconds since 2000, NULL for no
// deadline), across chunks and whatever the size of the reads.
func TestPgCopyReaderRows(t *testing.T) {
	now := time.Date(2030, 1, 2, 3, 4, 5, 6789, time.UTC)
	at := now.Add(time.Hour).In(time.FixedZone("east", 3600))
	exp := now.Add(2 * time.Hour)
	base := newJob{name: "a", typ: "default", payload: []byte(`{"n":1}`), maxAttempts: 3, baseDelay: 60, maxDelay: 3600, scheduledAt: now}
	with := func(f func(j *newJob)) *newJob { j := base; f(&j); return &j }
	jobs := []*newJob{
		with(func(*newJob) {}),
		with(func(j *newJob) { j.name, j.typ, j.payload = "données 🚀", "o'k\\", []byte(`{"s":"x"}`) }),
		with(func(j *newJob) { j.maxAttempts, j.baseDelay, j.maxDelay = 9, 7, 70 }),
		with(func(j *newJob) { j.scheduledAt, j.expiresAt = at, &exp }),
		with(func(j *newJob) { j.scheduledAt = time.Date(1999, 12, 31, 23, 59, 59, 999999000, time.UTC) }),
	}
	for len(jobs) < 1000 { // several chunks
		jobs = append(jobs, with(func(j *newJob) { j.payload = fmt.Appendf(nil, `{"n":%d}`, len(jobs)) }))
	}
	u32 := func(v uint32) []byte { return binary.BigEndian.AppendUint32(nil, v) }
	ts := func(tm time.Time) []byte {
		return binary.BigEndian.AppendUint64(nil, uint64(tm.UTC().Sub(time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)).Microseconds()))
	}
	for _, c := range []struct {
		name string
		read func(io.Reader) ([]byte, error)
	}{
		{"whole", io.ReadAll},
		{"one byte at a time", func(r io.Reader) ([]byte, error) { return io.ReadAll(iotest.OneByteReader(r)) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			data, err := c.read(newPgCopyReader(jobs, now.In(time.FixedZone("west", -7200))))
			if err != nil {
				t.Fatal(err)
			}
			rows := decodePgCopy(t, data)
			if len(rows) != len(jobs) {
				t.Fatalf("%d rows, want %d", len(rows), len(jobs))
			}
			for i, j := range jobs {
				var expires []byte
				if j.expiresAt != nil {
					expires = ts(*j.expiresAt)
				}
				want := [][]byte{[]byte(j.name), []byte(j.typ), append([]byte{1}, j.payload...), []byte("pending"), u32(0),
					u32(uint32(j.maxAttempts)), u32(uint32(j.baseDelay)), u32(uint32(j.maxDelay)), ts(j.scheduledAt), expires, ts(now)}
				if len(rows[i]) != len(pgCopyColumns) {
					t.Fatalf("row %d has %d fields, want %d (pgCopyColumns)", i, len(rows[i]), len(pgCopyColumns))
				}
				if g, w := fmt.Sprintf("%q", rows[i]), fmt.Sprintf("%q", want); g != w {
					t.Fatalf("row %d:\n got %s\nwant %s", i, g, w)
				}
			}
		})
	}
	t.Run("no jobs", func(t *testing.T) {
		data, err := io.ReadAll(newPgCopyReader(nil, now))
		if err != nil {
			t.Fatal(err)
		}
		if rows := decodePgCopy(t, data); len(rows) != 0 {
			t.Fatalf("%d rows, want none", len(rows))
		}
	})
}

// TestPgQuoteLiteral: the quoted text reads back as itself on the server,
// with standard_conforming_strings on or off.
func TestPgQuoteLiteral(t *testing.T) {
	env := coreEnv(t, engine.Postgres)
	ctx := context.Background()
	for _, scs := range []string{"on", "off"} {
		for _, s := range []string{"", "plain", "o'k", `back\slash`, `\'`, `'; SELECT 1; --`, "données 🚀", `E'x'`} {
			conn, err := env.db.Conn(ctx)
			if err != nil {
				t.Fatal(err)
			}
			var got string
			if _, err = conn.ExecContext(ctx, "SET standard_conforming_strings = "+scs); err == nil {
				err = conn.QueryRowContext(ctx, "SELECT "+pgQuoteLiteral(s)+"::text").Scan(&got)
			}
			conn.Close()
			if err != nil || got != s {
				t.Errorf("standard_conforming_strings %s: %s reads back as %q, %v; want %q", scs, pgQuoteLiteral(s), got, err, s)
			}
		}
	}
}

// TestEnqueueManyNotifiesInCopy: on PostgreSQL a bulk enqueue while the
// notifier is idle notifies in its COPY's own transaction (no NotifyTypes
// beside it); one while the notifier is sending leaves its notification to
// the notifier, as single enqueues do (pgNotifier.inline).
func TestEnqueueManyNotifiesInCopy(t *testing.T) {
	env := coreEnv(t, engine.Postgres)
	var sc stmtCounter
	q, _ := coreQueue(t, env, withStatementHook(sc.observe))
	ctx := context.Background()
	for _, busy := range []bool{false, true} {
		n := q.notifier
		n.mu.Lock()
		n.sending = busy
		n.mu.Unlock()
		sc.reset()
		if _, err := q.EnqueueMany(ctx, []JobArgs{testArgs{N: 1}, testArgs{N: 2}}, Type("b")); err != nil {
			t.Fatal(err)
		}
		want := 1
		if busy {
			want = 0
		}
		if got := sc.countWith("pg_notify"); got != want || sc.countWith("COPY ") != 1 {
			t.Errorf("notifier busy %v: %d COPY statements, %d notifying (%q); want one COPY, %d notifying", busy, sc.countWith("COPY "), got, sc.texts, want)
		}
		n.mu.Lock()
		if busy && !n.pending["b"] {
			t.Errorf("notifier busy: the notifier was not asked for type b (pending %v)", n.pending)
		}
		n.sending = false
		clear(n.pending)
		n.mu.Unlock()
		n.flush(ctx) // the send the idle case scheduled
	}
}

// TestEnqueueManyOtherColumnTypes: a table whose payload column is json,
// not jsonb (not SPEC's type, but one a user may have), does not fit the
// binary COPY: EnqueueMany takes the multi-row INSERT and the jobs arrive.
func TestEnqueueManyOtherColumnTypes(t *testing.T) {
	env := coreEnv(t, engine.Postgres)
	env.exec(t, "ALTER TABLE {t} ALTER COLUMN payload TYPE json")
	var sc stmtCounter
	q, _ := coreQueue(t, env, withStatementHook(sc.observe))
	ctx := context.Background()
	for range 2 {
		if n, err := q.EnqueueMany(ctx, []JobArgs{testArgs{N: 1}, testArgs{N: 2}}); err != nil || n != 2 {
			t.Fatalf("EnqueueMany = %d, %v", n, err)
		}
	}
	if ins, cp := sc.countWith("INSERT"), sc.countWith("COPY "); ins != 2 || cp != 0 {
		t.Errorf("%d INSERT and %d COPY statements (%q), want 2 and none", ins, cp, sc.texts)
	}
	if n := rowCount(t, env); n != 4 {
		t.Errorf("%d rows, want 4", n)
	}
	if q.run.copyFormat.Load() != copyNone {
		t.Errorf("copy format %d, want %d (checked once)", q.run.copyFormat.Load(), copyNone)
	}
}
