package queue

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math/big"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/testdb"
)

// FuzzRewriteTable: whatever the text, rewriteTable refuses it with
// errNotRewritten, or changes nothing but the bare words jobs (any case),
// each into the quoted name, and leaves a text that is still lexically
// complete (a word jobs after it is found and replaced too).
func FuzzRewriteTable(f *testing.F) {
	for _, s := range []string{
		"SELECT * FROM jobs WHERE id = $1",
		"UPDATE jobs SET x = 1 WHERE id IN (SELECT j.id FROM JOBS j)",
		"INSERT INTO jobs(name) VALUES ('jobs', E'it\\'s jobs', $$jobs$$, $t$ jobs $t$)",
		"SELECT `jobs`, \"jobs\", [jobs] FROM jobs -- jobs\n# jobs\n/* jobs /* nested */ jobs */",
		"SELECT 'a\\'jobs' FROM jobs",
		"SELECT pg_notify($1, $2) /* jobqueue:no-table */",
		"SELECT 'unterminated jobs", "SELECT jobs /* unterminated", "x$$ jobs", "jobs--x", "e'jobs'",
	} {
		for k := range 3 {
			f.Add(uint8(k), s)
		}
	}
	kinds := engine.Kinds()
	f.Fuzz(func(t *testing.T, k uint8, query string) {
		kind := kinds[int(k)%len(kinds)]
		if strings.Contains(query, "\x00") {
			return // the marker below
		}
		const marker = "\x00T\x00"
		out, n, err := rewriteTable(kind, query, marker)
		if err != nil {
			if !errors.Is(err, errNotRewritten) {
				t.Fatalf("%s %q: error %v is not errNotRewritten", kind, query, err)
			}
			return
		}
		if got := strings.Count(out, marker); got != n {
			t.Fatalf("%s %q: %d replacements counted, %d made: %q", kind, query, n, got, out)
		}
		back := strings.ReplaceAll(out, marker, "jobs")
		if len(back) != len(query) || !strings.EqualFold(back, query) {
			t.Fatalf("%s %q: the rewrite changed more than the table: %q", kind, query, out)
		}
		for i := strings.Index(out, marker); i >= 0; {
			end := i + len(marker)
			if i > 0 && isIdentByte(out[i-1]) || end < len(out) && isIdentByte(out[end]) {
				t.Fatalf("%s %q: replaced a part of a word: %q", kind, query, out)
			}
			next := strings.Index(out[end:], marker)
			if next < 0 {
				break
			}
			i = end + next
		}
		quoted := engine.Table{Kind: kind, Name: "t"}.Quoted()
		if n > 0 {
			text, _, err := rewriteTable(kind, query, quoted)
			if err != nil {
				t.Fatalf("%s %q: refused with another quoted name: %v", kind, query, err)
			}
			if _, m, err := rewriteTable(kind, text+"\njobs", quoted); err != nil || m != 1 {
				t.Fatalf("%s %q: the rewritten text %q is not complete: a jobs after it gives %d, %v", kind, query, text, m, err)
			}
		}
	})
}

// FuzzEnqueuePayload: on SQLite, whatever payload Enqueue is given, it
// either refuses it with ErrPayloadRejected and writes nothing, or stores
// it and Get returns the same JSON value (blank means {}). Invalid UTF-8,
// NUL, deep nesting and large payloads are among the seeds.
func FuzzEnqueuePayload(f *testing.F) { fuzzEnqueuePayload(f, engine.SQLite) }

// FuzzEnqueuePayloadPostgres is FuzzEnqueuePayload on PostgreSQL, whose
// JSONB refuses more than encoding/json does (\u0000, lone surrogates,
// numbers beyond its numeric type): those are ErrPayloadRejected too.
func FuzzEnqueuePayloadPostgres(f *testing.F) { fuzzEnqueuePayload(f, engine.Postgres) }

func fuzzEnqueuePayload(f *testing.F, kind engine.Kind) {
	for _, s := range []string{
		`{}`, ``, `  `, `null`, `"x"`, `[1,2.50,-0,1e2,1E-2]`, `{"a":{"b":[true,false,null]}}`, `{"a":1,"a":2}`,
		"{\"a\":\"\xff\"}", "{\"a\":\"\x00\"}", `{"a":"\u0000"}`, `{"a":"\\u0000"}`, `{"a":"\ud800"}`, `{"a":"\ud83d\ude00"}`,
		`{"a":1e400}`, `{"a":1e200000}`, `{"a":"é\u00e9"}`, `{"a"}`, `[`, "\xef\xbb\xbf{}",
		strings.Repeat("[", 10000) + strings.Repeat("]", 10000),
		strings.Repeat("[", 10001) + strings.Repeat("]", 10001),
		`{"big":"` + strings.Repeat("x", 1<<20) + `"}`,
	} {
		f.Add([]byte(s))
	}
	env := newTestEnv(f, kind)
	q := env.queue(f, nil, WithLogger(testdb.QuietLogger()))
	ctx := context.Background()
	var written int64
	f.Fuzz(func(t *testing.T, payload []byte) {
		id, err := q.Enqueue(ctx, RawArgs{Name: "fuzz", Payload: payload})
		if err != nil {
			if !errors.Is(err, ErrPayloadRejected) {
				t.Fatalf("%q: error %v is not ErrPayloadRejected", short(payload), err)
			}
			if kind == engine.SQLite && utf8.Valid(payload) && (len(bytes.TrimSpace(payload)) == 0 || json.Valid(payload)) {
				t.Fatalf("%q: refused (%v), but it is JSON", short(payload), err)
			}
		} else {
			written++
			got := getJob(t, q, id).Payload
			want := payload
			if len(bytes.TrimSpace(want)) == 0 {
				want = []byte("{}")
			}
			if !sameJSON(t, got, want) {
				t.Fatalf("%q stored as %q", short(payload), short(got))
			}
		}
		stats, err := q.Stats(ctx, "")
		if err != nil {
			t.Fatal(err)
		}
		if stats[StatusPending] != written {
			t.Fatalf("%q: %d jobs in the table, %d enqueued", short(payload), stats[StatusPending], written)
		}
	})
}

// sameJSON reports whether a and b are the same JSON value: numbers
// compared exactly, object keys in any order (the last of a duplicate
// wins, as in JSONB).
func sameJSON(t *testing.T, a, b []byte) bool {
	t.Helper()
	va, vb := decodeExact(t, a), decodeExact(t, b)
	return reflect.DeepEqual(va, vb)
}

// decodeExact decodes JSON with numbers as exact rationals (as strings).
func decodeExact(t *testing.T, js []byte) any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("not JSON (%v): %q", err, short(js))
	}
	var exact func(any) any
	exact = func(v any) any {
		switch x := v.(type) {
		case json.Number:
			r, ok := new(big.Rat).SetString(string(x))
			if !ok {
				return "bad number " + string(x)
			}
			return r.RatString()
		case []any:
			for i := range x {
				x[i] = exact(x[i])
			}
		case map[string]any:
			for k := range x {
				x[k] = exact(x[k])
			}
		}
		return v
	}
	return exact(v)
}

// short is the start of a long payload, for messages.
func short(b []byte) []byte {
	if len(b) > 200 {
		return append(b[:200:200], "…"...)
	}
	return b
}

// TestEnqueueHardPayloads: payloads at the engines' limits, on every
// engine: 10 MB and 31 levels of nesting are stored and read back the
// same; 10 000 levels (encoding/json's limit) too, but on MySQL/MariaDB
// (at most 100 and 31 levels), where they are refused with
// ErrPayloadRejected, as 10 001 levels are everywhere, writing nothing.
func TestEnqueueHardPayloads(t *testing.T) {
	forEachEngine(t, func(t *testing.T, kind engine.Kind) {
		env := newTestEnv(t, kind)
		q := env.queue(t, nil, WithLogger(testdb.QuietLogger()))
		ctx := context.Background()
		for _, c := range []struct {
			name    string
			payload string
			ok      bool
		}{
			{"10 MB", `{"big":"` + strings.Repeat("x", 10<<20) + `"}`, true},
			{"31 deep", strings.Repeat("[", 31) + strings.Repeat("]", 31), true},
			{"10 000 deep", strings.Repeat("[", 10000) + strings.Repeat("]", 10000), kind != engine.MySQL},
			{"10 001 deep", strings.Repeat("[", 10001) + strings.Repeat("]", 10001), false},
		} {
			t.Run(c.name, func(t *testing.T) {
				before, err := q.Stats(ctx, "")
				if err != nil {
					t.Fatal(err)
				}
				id, err := q.Enqueue(ctx, RawArgs{Name: "hard", Payload: json.RawMessage(c.payload)})
				if !c.ok {
					after, serr := q.Stats(ctx, "")
					if serr != nil {
						t.Fatal(serr)
					}
					if !errors.Is(err, ErrPayloadRejected) || after[StatusPending] != before[StatusPending] {
						t.Fatalf("Enqueue: %d, %v; pending %d → %d; want ErrPayloadRejected and nothing written", id, err, before[StatusPending], after[StatusPending])
					}
					return
				}
				if err != nil {
					t.Fatalf("Enqueue: %v", err)
				}
				if got := getJob(t, q, id).Payload; !sameJSON(t, got, []byte(c.payload)) {
					t.Fatalf("payload of %d bytes stored as %d bytes", len(c.payload), len(got))
				}
			})
		}
	})
}
