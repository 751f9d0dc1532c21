package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jobqueue/jobqueue/internal/testdb"

	"github.com/jobqueue/jobqueue/internal/engine"
)

// columns are the keys of a job in --json output: the table's columns.
var columns = []string{"id", "name", "type", "payload", "status", "attempts", "claim_token", "lease_until",
	"max_attempts", "base_delay", "max_delay", "error", "scheduled_at", "expires_at", "finished_at", "created_at"}

// envCLI gives a test its own table on e's database (dropped at the end)
// and a cli for it.
func envCLI(t *testing.T, e *testdb.Env) cli {
	t.Helper()
	return cli{db: e.URL, table: e.Table(t)}
}

// sqliteCLI is envCLI on a new SQLite database in the test's temp dir.
func sqliteCLI(t *testing.T) cli {
	t.Helper()
	return envCLI(t, testdb.New(t, engine.SQLite))
}

// TestLifecycle drives the whole life of jobs through the binary on every
// engine: install → enqueue → work --exec → stats/list/show → retry →
// expire/reclaim → prune.
func TestLifecycle(t *testing.T) {
	t.Parallel()
	testdb.ForEachEngine(t, func(t *testing.T, e *testdb.Env) {
		c := envCLI(t, e)
		if out := c.ok(t, "install"); !strings.Contains(out, "installed") {
			t.Errorf("install printed %q", out)
		}
		c.ok(t, "install") // idempotent

		enqueue := func(args ...string) int64 {
			t.Helper()
			out := c.ok(t, append([]string{"enqueue"}, args...)...)
			id, err := strconv.ParseInt(strings.TrimSpace(out), 10, 64)
			if err != nil {
				t.Fatalf("enqueue printed %q, not an id", out)
			}
			return id
		}
		okID := enqueue("--name", "greet", "--type", "mail", "--payload", `{"to":"ada","n":1,"s":"héllo"}`)
		failID := enqueue("--name", "fail_me", "--type", "mail", "--payload", `[1,2]`, "--max-attempts", "1", "--base-delay", "5", "--max-delay", "10")
		laterID := enqueue("--name", "later", "--type", "mail", "--delay", "1h")

		// The command records what it saw, and fails the job named fail_me.
		dir := t.TempDir()
		script := fmt.Sprintf(`{ echo "$JOB_ID $JOB_NAME $JOB_TYPE $JOB_ATTEMPT"; cat; } > %s/$JOB_ID
if [ "$JOB_NAME" = fail_me ]; then echo "early noise" >&2; echo "boom for $JOB_ID" >&2; exit 3; fi
echo "ran $JOB_ID"`, dir)
		r := c.run(t, "work", "--type", "mail", "--concurrency", "2", "--max-jobs", "2", "--exec", script)
		if r.code != 0 {
			t.Fatalf("work: exit %d, stderr %s", r.code, r.stderr)
		}
		if !strings.Contains(r.stdout, fmt.Sprintf("ran %d", okID)) {
			t.Errorf("the command's stdout was not passed through: %q", r.stdout)
		}
		for id, want := range map[int64]string{
			okID:   fmt.Sprintf("%d greet mail 1\n{\"n\":1,\"s\":\"héllo\",\"to\":\"ada\"}", okID),
			failID: fmt.Sprintf("%d fail_me mail 1\n[1,2]", failID),
		} {
			b, err := os.ReadFile(filepath.Join(dir, strconv.FormatInt(id, 10)))
			if err != nil {
				t.Fatalf("job %d did not run: %v", id, err)
			}
			if got := compactJSONLine(t, string(b)); got != want {
				t.Errorf("job %d saw %q, want %q", id, got, want)
			}
		}

		assertStats(t, c, "", map[string]int64{"pending": 1, "completed": 1, "failed": 1})
		assertStats(t, c, "mail", map[string]int64{"pending": 1, "completed": 1, "failed": 1})
		assertStats(t, c, "other", nil)

		// list --json: every job, newest first, keys = columns.
		var all []map[string]any
		decodeJSON(t, c.ok(t, "list", "--json"), &all)
		var ids []int64
		for _, j := range all {
			assertColumns(t, j)
			ids = append(ids, int64(j["id"].(float64)))
		}
		if want := []int64{laterID, failID, okID}; !reflect.DeepEqual(ids, want) {
			t.Errorf("list ids %v, want %v (newest first)", ids, want)
		}
		// list pages: --limit 1 and --after-id walk the same ids.
		var paged []int64
		for after := int64(0); ; {
			var page []map[string]any
			decodeJSON(t, c.ok(t, "list", "--json", "--limit", "1", "--after-id", strconv.FormatInt(after, 10)), &page)
			if len(page) == 0 {
				break
			}
			if len(page) != 1 || len(paged) > len(ids) {
				t.Fatalf("list --limit 1 --after-id %d: %v", after, page)
			}
			after = int64(page[0]["id"].(float64))
			paged = append(paged, after)
		}
		if !reflect.DeepEqual(paged, ids) {
			t.Errorf("list pages %v, want %v", paged, ids)
		}
		var greets []map[string]any
		decodeJSON(t, c.ok(t, "list", "--json", "--name", "greet", "--type", "mail"), &greets)
		if len(greets) != 1 || int64(greets[0]["id"].(float64)) != okID || greets[0]["name"] != "greet" {
			t.Errorf("list --name greet --type mail: %v; want job %d only", greets, okID)
		}
		var failed []map[string]any
		decodeJSON(t, c.ok(t, "list", "--status", "failed", "--json"), &failed)
		if len(failed) != 1 || int64(failed[0]["id"].(float64)) != failID {
			t.Fatalf("list --status failed: %v", failed)
		}
		errText, _ := failed[0]["error"].(string)
		if !strings.Contains(errText, "exit status 3") || !strings.HasSuffix(errText, fmt.Sprintf("boom for %d", failID)) {
			t.Errorf("failed job's error %q lacks the exit status or the end of stderr", errText)
		}

		// show --json of the completed job.
		var done map[string]any
		decodeJSON(t, c.ok(t, "show", strconv.FormatInt(okID, 10), "--json"), &done)
		assertColumns(t, done)
		for key, want := range map[string]any{
			"name": "greet", "type": "mail", "status": "completed", "attempts": 1.0,
			"claim_token": nil, "lease_until": nil, "expires_at": nil, "error": nil,
			"max_attempts": 3.0, "base_delay": 60.0, "max_delay": 3600.0,
			"payload": map[string]any{"to": "ada", "n": 1.0, "s": "héllo"},
		} {
			if !reflect.DeepEqual(done[key], want) {
				t.Errorf("show: %s = %#v, want %#v", key, done[key], want)
			}
		}
		for _, key := range []string{"scheduled_at", "finished_at", "created_at"} {
			s, _ := done[key].(string)
			ts, err := time.Parse(time.RFC3339Nano, s)
			if err != nil || !strings.HasSuffix(s, "Z") || time.Since(ts) > time.Hour || time.Since(ts) < -time.Minute {
				t.Errorf("show: %s = %q, want a recent RFC 3339 UTC time", key, s)
			}
		}
		if out := c.ok(t, "show", strconv.FormatInt(okID, 10)); !strings.Contains(out, "completed") {
			t.Errorf("show:\n%s", out)
		}
		assertOneLineError(t, c.run(t, "show", "999999"), exitFailure, "no job 999999")

		// retry: the failed job goes back to pending; others cannot.
		if out := c.ok(t, "retry", strconv.FormatInt(failID, 10)); !strings.Contains(out, "pending") {
			t.Errorf("retry printed %q", out)
		}
		var retried map[string]any
		decodeJSON(t, c.ok(t, "show", strconv.FormatInt(failID, 10), "--json"), &retried)
		if retried["status"] != "pending" || retried["attempts"] != 0.0 || retried["error"] != nil || retried["finished_at"] != nil {
			t.Errorf("retried job: %v", retried)
		}
		assertOneLineError(t, c.run(t, "retry", strconv.FormatInt(okID, 10)), exitFailure, "is completed", "only failed or expired")
		assertOneLineError(t, c.run(t, "retry", "999999"), exitFailure, "no job 999999")

		// expire: a job with a 1 s deadline expires. (Enqueued only now:
		// a worker expires overdue jobs when it starts.)
		enqueue("--name", "soon_gone", "--type", "other", "--expires-in", "1s")
		if out := c.ok(t, "list", "--type", "other"); !strings.Contains(out, "soon_gone") || strings.Contains(out, "greet") {
			t.Errorf("list --type other:\n%s", out)
		}
		// Until its deadline passes, expire finds nothing; then it
		// expires that one job.
		eventually(t, 20*time.Second, "the 1 s deadline to pass", func() bool {
			out := c.ok(t, "expire")
			if out != "expired 0 jobs\n" && out != "expired 1 job\n" {
				t.Fatalf("expire printed %q", out)
			}
			return out == "expired 1 job\n"
		})
		if out := c.ok(t, "reclaim"); out != "reclaimed 0 jobs\n" {
			t.Errorf("reclaim printed %q", out)
		}
		assertStats(t, c, "", map[string]int64{"pending": 2, "completed": 1, "expired": 1})

		// prune: finished jobs go, each once its finish time is in the
		// past (MySQL keeps whole seconds, so that may take a second).
		if out := c.ok(t, "prune", "--older-than", "1h"); out != "pruned 0 jobs\n" {
			t.Errorf("prune --older-than 1h printed %q", out)
		}
		pruned := 0
		eventually(t, 20*time.Second, "prune --older-than 0s to remove both finished jobs", func() bool {
			var n int
			out := c.ok(t, "prune", "--older-than", "0s")
			if _, err := fmt.Sscanf(out, "pruned %d", &n); err != nil || out != "pruned "+jobCount(n)+"\n" {
				t.Fatalf("prune printed %q: %v", out, err)
			}
			pruned += n
			return pruned >= 2
		})
		if pruned != 2 {
			t.Errorf("prune --older-than 0s removed %d jobs in all, want 2", pruned)
		}
		assertStats(t, c, "", map[string]int64{"pending": 2})
	})
}

// assertStats checks `stats --json` (optionally of one type): exactly the
// five keys, with the given counts (missing ones are 0).
func assertStats(t *testing.T, c cli, typ string, want map[string]int64) {
	t.Helper()
	args := []string{"stats", "--json"}
	if typ != "" {
		args = append(args, "--type", typ)
	}
	out := c.ok(t, args...)
	var got map[string]int64
	decodeJSON(t, out, &got)
	full := map[string]int64{"pending": 0, "in_progress": 0, "completed": 0, "failed": 0, "expired": 0}
	for k, v := range want {
		full[k] = v
	}
	if !reflect.DeepEqual(got, full) {
		t.Errorf("stats %s: %s, want %v", typ, strings.TrimSpace(out), full)
	}
	if !strings.HasPrefix(out, `{"pending":`) || strings.Count(out, "\n") != 1 {
		t.Errorf("stats --json is not one line in the SPEC's key order: %q", out)
	}
}

// assertColumns checks that a job's JSON has exactly the column names.
func assertColumns(t *testing.T, j map[string]any) {
	t.Helper()
	var keys []string
	for k := range j {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	want := slices.Clone(columns)
	slices.Sort(want)
	if !reflect.DeepEqual(keys, want) {
		t.Errorf("job keys %v, want %v", keys, want)
	}
}

func decodeJSON(t *testing.T, s string, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(s), v); err != nil {
		t.Fatalf("not JSON (%v): %q", err, s)
	}
}

// compactJSONLine returns s with its second line (a JSON payload as the
// database returned it) compacted, since engines may re-space JSON.
func compactJSONLine(t *testing.T, s string) string {
	head, body, ok := strings.Cut(s, "\n")
	if !ok {
		t.Errorf("want a line of metadata and a line of payload, got %q", s)
		return s
	}
	var v any
	if err := json.Unmarshal([]byte(body), &v); err != nil {
		t.Errorf("the command's stdin was not JSON: %q", body)
		return s
	}
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	// encoding/json sorts keys; compare with the same treatment.
	return head + "\n" + string(b)
}

// TestEnqueueBadInput checks, on every engine, that a job the queue
// refuses is a usage error (exit 2) and writes nothing.
func TestEnqueueBadInput(t *testing.T) {
	t.Parallel()
	testdb.ForEachEngine(t, func(t *testing.T, e *testdb.Env) {
		c := envCLI(t, e)
		c.ok(t, "install")
		type badCase struct {
			name string
			args []string
		}
		cases := []badCase{
			{"kind too long", []string{"--name", strings.Repeat("k", 256)}},
			{"empty kind", []string{"--name", ""}},
			{"type too long", []string{"--name", "k", "--type", strings.Repeat("t", 65)}},
			{"deadline before start", []string{"--name", "k", "--at", "2030-01-02T00:00:00Z", "--expires-at", "2030-01-01T00:00:00Z"}},
		}
		if e.Kind == engine.Postgres {
			cases = append(cases, badCase{"NUL in JSONB", []string{"--name", "k", "--payload", `{"a":"\u0000"}`}})
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				r := c.run(t, append([]string{"enqueue"}, tc.args...)...)
				assertOneLineError(t, r, exitUsage)
				if r.stdout != "" {
					t.Errorf("enqueue %q printed %q", tc.args, r.stdout)
				}
			})
		}
		assertStats(t, c, "", nil)
	})
}

// TestEnqueueDeadlineAccepted: the check that refuses a deadline before
// the job may run (TestUsageErrors) lets every deadline at or after it
// through, whichever flags give the two: a deadline equal to the start
// included. (The check is the command's, before the database: SQLite only.)
func TestEnqueueDeadlineAccepted(t *testing.T) {
	t.Parallel()
	c := sqliteCLI(t)
	c.ok(t, "install")
	cases := []struct {
		name string
		args []string
	}{
		{"--expires-at equal to --at", []string{"--at", "2030-01-01T00:00:00Z", "--expires-at", "2030-01-01T00:00:00Z"}},
		{"--expires-at after --at, another zone", []string{"--at", "2030-01-01T00:00:00Z", "--expires-at", "2030-01-01T01:30:00+01:00"}},
		{"--expires-in equal to --delay", []string{"--delay", "1h", "--expires-in", "1h"}},
		{"--expires-in longer than --delay", []string{"--delay", "1h", "--expires-in", "2h"}},
		{"--expires-in after --at", []string{"--at", "2020-01-01T00:00:00Z", "--expires-in", "1m"}},
		{"--expires-at after --delay", []string{"--delay", "1m", "--expires-at", "9999-12-31T23:59:59Z"}},
		{"--expires-at to come", []string{"--expires-at", "9999-12-31T23:59:59Z"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			id := strings.TrimSpace(c.ok(t, append([]string{"enqueue", "--name", "k"}, tc.args...)...))
			var job jobJSON
			decodeJSON(t, c.ok(t, "show", id, "--json"), &job)
			if job.ExpiresAt == nil {
				t.Fatalf("no expires_at; want %v", tc.args)
			}
			expires, err := time.Parse(time.RFC3339Nano, *job.ExpiresAt)
			if err != nil {
				t.Fatal(err)
			}
			scheduled, err := time.Parse(time.RFC3339Nano, job.ScheduledAt)
			if err != nil {
				t.Fatal(err)
			}
			if expires.Before(scheduled) {
				t.Errorf("expires_at %s, scheduled_at %s; want a deadline at or after the start", *job.ExpiresAt, job.ScheduledAt)
			}
		})
	}
}
