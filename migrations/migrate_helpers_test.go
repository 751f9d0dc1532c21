package migrations

// Helpers of the Migrate tests: version 1 tables from testdata, their rows,
// and readers of the migrated table.

import (
	"context"
	"database/sql"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/testdb"
)

// v1Table creates a fresh version 1 table on e (createV1) holding jobs
// (insertV1) and returns its name.
func v1Table(t *testing.T, e *testdb.Env, jobs []v1Job) string {
	t.Helper()
	table := e.Table(t)
	createV1(t, e.DB, e.Kind, table)
	insertV1(t, e.DB, e.Kind, table, jobs)
	return table
}

// createV1 creates the version 1 table of testdata/v1_<engine>.sql named
// table.
func createV1(t testing.TB, db *sql.DB, k engine.Kind, table string) {
	t.Helper()
	raw, err := os.ReadFile("testdata/v1_" + string(k) + ".sql")
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, l := range strings.Split(string(raw), "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "--") {
			lines = append(lines, l)
		}
	}
	for _, stmt := range strings.Split(strings.Join(lines, "\n"), ";") {
		stmt = strings.TrimSpace(strings.ReplaceAll(stmt, "{{table}}", table))
		if stmt == "" {
			continue
		}
		if _, err := db.ExecContext(context.Background(), stmt); err != nil {
			t.Fatalf("create v1 table: %v\n%s", err, stmt)
		}
	}
}

// v1Job is one row of a version 1 table as a test writes it. Times are
// instants; sqliteForm says how SQLite stores them (see sqliteV1Time).
type v1Job struct {
	ID          int64
	Name, Type  string
	Payload     string
	Status      string
	RetryCount  int
	Error       *string
	ScheduledAt time.Time
	LockedAt    *time.Time
	ExpiresAt   *time.Time
	CreatedAt   time.Time
	sqliteForm  int
}

// The forms in which version 1 rows on SQLite hold their times.
const (
	sqlitePlain  = iota // 2006-01-02 15:04:05 (CURRENT_TIMESTAMP)
	sqliteISOZ          // 2006-01-02T15:04:05.000Z
	sqliteMillis        // 2006-01-02 15:04:05.000
	sqliteFixed         // 2006-01-02 15:04:05.000000 (already version 2's form)
	sqliteOffset        // 2006-01-02T18:04:05.000+03:00
	sqliteUnix          // integer Unix seconds
	sqliteGoTime        // what modernc writes for a time.Time argument
	numSQLiteForms
)

// sqliteV1Time is tm in SQLite form f.
func sqliteV1Time(tm time.Time, f int) any {
	tm = tm.UTC()
	switch f {
	case sqliteISOZ:
		return tm.Format("2006-01-02T15:04:05.000Z")
	case sqliteMillis:
		return tm.Format("2006-01-02 15:04:05.000")
	case sqliteFixed:
		return tm.Format(engine.SQLiteTimeFormat)
	case sqliteOffset:
		return tm.In(time.FixedZone("", 3*3600)).Format("2006-01-02T15:04:05.000-07:00")
	case sqliteUnix:
		return tm.Unix()
	case sqliteGoTime:
		return tm.In(time.FixedZone("", -5*3600)).Format("2006-01-02 15:04:05.999999999-07:00")
	default:
		return tm.Format("2006-01-02 15:04:05")
	}
}

// precision is how finely engine k keeps the times of a version 1 row in
// form f: whole seconds on MySQL (DATETIME, TIMESTAMP), microseconds on
// PostgreSQL, on SQLite what the form holds (SQLite's own reading keeps
// milliseconds).
func precision(k engine.Kind, f int) time.Duration {
	switch {
	case k == engine.MySQL:
		return time.Second
	case k == engine.Postgres:
		return time.Microsecond
	case f == sqlitePlain || f == sqliteUnix:
		return time.Second
	case f == sqliteFixed:
		return time.Microsecond
	default:
		return time.Millisecond
	}
}

// testPolicy is the policy the tests migrate with.
var testPolicy = RetryPolicy{MaxAttempts: 3, BaseDelay: 30 * time.Second, MaxDelay: 10 * time.Minute}

// v1Fixture builds version 1 jobs in every status, with retry counts
// below, at and over testPolicy.MaxAttempts, without a deadline, with a
// passed one and a future one, with and without errors, with unicode
// payloads, names and errors, and ids with gaps. Times are around now.
func v1Fixture(k engine.Kind, now time.Time) []v1Job {
	payloads := []string{
		`{"to":"a@example.com","subject":"hello 👋 世界"}`,
		`{"q":"it's \"quoted\" and a back\\slash","path":"C:\\temp\\x"}`,
		`{"emoji":"🚀🔥🎉","cjk":"日本語のテキスト","ko":"한국어","nested":{"a":[null,true,false,1.5]}}`,
		`[1,2,3]`,
		`{}`,
		`{"s":"tab\tnewline\nnull\u0001 and ' and \" and \\\\"}`,
	}
	names := []string{"send_email", "résumé.render", "批处理.任务", "it's-a \"name\""}
	types := []string{"default", "email", "Email", "重要"}
	errs := []*string{nil, ptr("boom"), ptr("échec: 失败 💥 'quoted' \"double\" back\\slash"), ptr("")}
	var jobs []v1Job
	id := int64(1)
	n := 0
	for _, status := range []string{"pending", "in_progress", "completed", "failed"} {
		for _, rc := range []int{0, 1, 2, 3, 5} {
			for _, deadline := range []string{"none", "passed", "future"} {
				f := n % numSQLiteForms
				p := precision(k, f)
				sched := now.Add(-time.Duration(n+1)*time.Minute - time.Duration(n)*123456*time.Microsecond).Truncate(p)
				j := v1Job{
					ID:          id,
					Name:        names[n%len(names)],
					Type:        types[n%len(types)],
					Payload:     payloads[n%len(payloads)],
					Status:      status,
					RetryCount:  rc,
					Error:       errs[n%len(errs)],
					ScheduledAt: sched,
					CreatedAt:   sched.Add(-time.Duration(n+1) * time.Hour).Truncate(p),
					sqliteForm:  f,
				}
				if rc == 0 && status == "pending" {
					j.Error = nil
				}
				switch deadline {
				case "passed":
					j.ExpiresAt = ptr(now.Add(-time.Duration(n+1) * time.Second).Truncate(p))
				case "future":
					j.ExpiresAt = ptr(now.Add(24 * time.Hour).Truncate(p))
				}
				if status == "in_progress" || (status == "completed" && n%2 == 0) {
					j.LockedAt = ptr(now.Add(-5 * time.Minute).Truncate(p))
				}
				jobs = append(jobs, j)
				id += int64(1 + n%3) // gaps
				n++
			}
		}
	}
	return jobs
}

func ptr[T any](v T) *T { return &v }

// insertV1 writes jobs into the version 1 table, with their ids. On
// MySQL created_at (a TIMESTAMP) is written as an instant whatever the
// session's time zone.
func insertV1(t testing.TB, db *sql.DB, k engine.Kind, table string, jobs []v1Job) {
	t.Helper()
	ctx := context.Background()
	tb := engine.Table{Kind: k, Name: table}
	cols := "(id, name, type, payload, status, retry_count, error, scheduled_at, locked_at, expires_at, created_at)"
	for _, j := range jobs {
		var q string
		var args []any
		tm := func(v *time.Time) any {
			if v == nil {
				return nil
			}
			if k == engine.SQLite {
				return sqliteV1Time(*v, j.sqliteForm)
			}
			return k.TimeArg(*v)
		}
		switch k {
		case engine.Postgres:
			q = "INSERT INTO " + tb.Quoted() + " " + cols + " VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)"
			args = []any{j.ID, j.Name, j.Type, j.Payload, j.Status, j.RetryCount, j.Error, tm(&j.ScheduledAt), tm(j.LockedAt), tm(j.ExpiresAt), tm(&j.CreatedAt)}
		case engine.MySQL:
			q = "INSERT INTO " + tb.Quoted() + " " + cols + " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, FROM_UNIXTIME(?))"
			args = []any{j.ID, j.Name, j.Type, j.Payload, j.Status, j.RetryCount, j.Error, tm(&j.ScheduledAt), tm(j.LockedAt), tm(j.ExpiresAt), j.CreatedAt.Unix()}
		case engine.SQLite:
			q = "INSERT INTO " + tb.Quoted() + " " + cols + " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
			args = []any{j.ID, j.Name, j.Type, j.Payload, j.Status, j.RetryCount, j.Error, tm(&j.ScheduledAt), tm(j.LockedAt), tm(j.ExpiresAt), tm(&j.CreatedAt)}
		}
		if _, err := db.ExecContext(ctx, q, args...); err != nil {
			t.Fatalf("insert v1 job %d: %v", j.ID, err)
		}
	}
	if k == engine.Postgres && len(jobs) > 0 {
		if _, err := db.ExecContext(ctx, `SELECT setval(pg_get_serial_sequence($1, 'id'), (SELECT max(id) FROM `+tb.Quoted()+`))`, tb.Quoted()); err != nil {
			t.Fatal(err)
		}
	}
}

// v2Job is one row of a migrated table as the tests read it.
type v2Job struct {
	ID          int64
	Name, Type  string
	Payload     string
	Status      string
	Attempts    int
	ClaimToken  *string
	LeaseUntil  *time.Time
	MaxAttempts int
	BaseDelay   int
	MaxDelay    int
	Error       *string
	ScheduledAt time.Time
	ExpiresAt   *time.Time
	FinishedAt  *time.Time
	CreatedAt   time.Time
}

// readV2 reads every row of the version 2 table, by id. On SQLite each time
// must be text in the fixed-width form engine.SQLiteTimeFormat.
func readV2(t testing.TB, db *sql.DB, k engine.Kind, table string) []v2Job {
	t.Helper()
	tb := engine.Table{Kind: k, Name: table}
	tcol := func(c string) string {
		if k == engine.SQLite {
			return "CAST(" + c + " AS TEXT)"
		}
		return c
	}
	payload := "payload"
	if k == engine.Postgres {
		payload = "payload::text"
	}
	q := "SELECT id, name, type, " + payload + ", status, attempts, claim_token, " + tcol("lease_until") +
		", max_attempts, base_delay, max_delay, error, " + tcol("scheduled_at") + ", " + tcol("expires_at") +
		", " + tcol("finished_at") + ", " + tcol("created_at") + " FROM " + tb.Quoted() + " ORDER BY id"
	rows, err := db.QueryContext(context.Background(), q)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []v2Job
	for rows.Next() {
		var j v2Job
		var lease, sched, exp, fin, created any
		if err := rows.Scan(&j.ID, &j.Name, &j.Type, &j.Payload, &j.Status, &j.Attempts, &j.ClaimToken, &lease,
			&j.MaxAttempts, &j.BaseDelay, &j.MaxDelay, &j.Error, &sched, &exp, &fin, &created); err != nil {
			t.Fatal(err)
		}
		j.LeaseUntil = dbTime(t, k, lease)
		j.ScheduledAt = *mustTime(t, k, "scheduled_at", sched)
		j.ExpiresAt = dbTime(t, k, exp)
		j.FinishedAt = dbTime(t, k, fin)
		j.CreatedAt = *mustTime(t, k, "created_at", created)
		out = append(out, j)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func mustTime(t testing.TB, k engine.Kind, col string, v any) *time.Time {
	t.Helper()
	tm := dbTime(t, k, v)
	if tm == nil {
		t.Fatalf("%s is NULL", col)
	}
	return tm
}

// dbTime converts a time read from engine k: a time.Time (PostgreSQL,
// MySQL: a UTC wall clock) or SQLite text, which must have the fixed-width
// form exactly.
func dbTime(t testing.TB, k engine.Kind, v any) *time.Time {
	t.Helper()
	switch v := v.(type) {
	case nil:
		return nil
	case time.Time:
		u := engine.AsUTC(v)
		return &u
	case []byte:
		return dbTime(t, k, string(v))
	case string:
		tm, err := time.Parse(engine.SQLiteTimeFormat, v)
		if err != nil || tm.Format(engine.SQLiteTimeFormat) != v {
			t.Errorf("time %q is not in the fixed-width form %q (%v)", v, engine.SQLiteTimeFormat, err)
		}
		return &tm
	default:
		t.Fatalf("unexpected time value %T %v", v, v)
		return nil
	}
}

// expectV2 is what SPEC section 4 says a version 1 job becomes when
// migrated at now with policy p; payload is the text the version 1 table
// returned for it.
func expectV2(j v1Job, k engine.Kind, p RetryPolicy, now time.Time, payload string) v2Job {
	maxA, base, maxD := p.internal().Seconds()
	attempts := j.RetryCount
	if j.Status == "in_progress" || j.Status == "completed" {
		attempts++
	}
	want := v2Job{
		ID: j.ID, Name: j.Name, Type: j.Type, Payload: payload, Status: j.Status, Attempts: attempts,
		MaxAttempts: int(maxA), BaseDelay: int(base), MaxDelay: int(maxD), Error: j.Error,
		ScheduledAt: j.ScheduledAt, ExpiresAt: j.ExpiresAt, CreatedAt: j.CreatedAt,
	}
	if j.Status == "completed" || j.Status == "failed" {
		want.FinishedAt = ptr(j.ScheduledAt)
	}
	if j.Status == "in_progress" {
		want.Status = "pending"
		want.ScheduledAt = now
	}
	if want.Status == "pending" {
		switch {
		case j.ExpiresAt != nil && !j.ExpiresAt.After(now):
			want.Status, want.FinishedAt = "expired", ptr(now)
		case attempts >= int(maxA):
			want.Status, want.FinishedAt = "failed", ptr(now)
		}
	}
	return want
}

// payloadTexts reads each job's payload as the table returns it.
func payloadTexts(t testing.TB, db *sql.DB, k engine.Kind, table string) map[int64]string {
	t.Helper()
	col := "payload"
	if k == engine.Postgres {
		col = "payload::text"
	}
	rows, err := db.QueryContext(context.Background(), "SELECT id, "+col+" FROM "+engine.Table{Kind: k, Name: table}.Quoted())
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[int64]string{}
	for rows.Next() {
		var id int64
		var p string
		if err := rows.Scan(&id, &p); err != nil {
			t.Fatal(err)
		}
		out[id] = p
	}
	return out
}

// jsonEqual reports whether two JSON texts hold the same value.
func jsonEqual(a, b string) bool {
	var x, y any
	if json.Unmarshal([]byte(a), &x) != nil || json.Unmarshal([]byte(b), &y) != nil {
		return false
	}
	xa, errX := json.Marshal(x)
	ya, errY := json.Marshal(y)
	return errX == nil && errY == nil && string(xa) == string(ya)
}

// catalog is a table's columns and indexes as the catalog shows them, with
// the table name in index names replaced by T, for comparing two tables.
type catalog struct {
	Columns map[string]columnInfo
	Indexes map[string]indexInfo
}
