package main

import (
	"context"
	"net/url"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/testdb"
	"github.com/jobqueue/jobqueue/migrations"
	"github.com/jobqueue/jobqueue/queue"
)

// TestDemo runs the demo twice on a new SQLite file: both runs finish in
// under a minute with the same outcome (the demo starts from a clean slate).
func TestDemo(t *testing.T) {
	t.Parallel()
	db := "sqlite:" + filepath.Join(t.TempDir(), "demo.db")
	want := map[string]string{"pending": "0", "in_progress": "0", "completed": "11", "failed": "3", "expired": "1"}
	for run := 1; run <= 2; run++ {
		start := time.Now()
		r := cli{db: db, timeout: 70 * time.Second}.run(t, "demo")
		if r.code != 0 {
			t.Fatalf("run %d: exit %d, stderr:\n%s", run, r.code, r.stderr)
		}
		if d := time.Since(start); d > time.Minute {
			t.Errorf("run %d took %v", run, d)
		}
		for status, n := range want {
			if !regexp.MustCompile(`(?m)^` + status + ` +` + n + `$`).MatchString(r.stdout) {
				t.Errorf("run %d: the summary does not show %s %s:\n%s", run, status, n, r.stdout)
			}
		}
		for _, s := range []string{"resize_image", "thumbnail service timed out", "card of cus_1001 declined", "invalid address", "flash_sale"} {
			if !strings.Contains(r.stdout, s) {
				t.Errorf("run %d: the example rows lack %q:\n%s", run, s, r.stdout)
			}
		}
		// Not a terminal: plain progress lines, ending with every job finished.
		if !strings.Contains(r.stderr, "progress: 15/15 finished") {
			t.Errorf("run %d: stderr lacks the final progress line:\n%s", run, r.stderr)
		}
	}
}

// TestDemoHidesPassword runs the demo on PostgreSQL with a password in the
// URL: the demo names its database on stdout, without the password.
func TestDemoHidesPassword(t *testing.T) {
	t.Parallel()
	u, err := url.Parse(testdb.URL(t, engine.Postgres))
	if err != nil {
		t.Fatal(err)
	}
	password, ok := u.User.Password()
	if !ok {
		// The test server trusts its clients: any password is accepted.
		password = "s3cret-demo"
		u.User = url.UserPassword(u.User.Username(), password)
	}
	db := testdb.OpenURL(t, u.String())
	c := cli{db: u.String(), table: testdb.Table(t, db), timeout: 70 * time.Second}
	r := c.run(t, "demo")
	if r.code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", r.code, r.stderr)
	}
	if !strings.Contains(r.stdout, "jobqueue demo on postgres://") {
		t.Errorf("the demo does not name its database:\n%s", r.stdout)
	}
	if strings.Contains(r.stdout+r.stderr, password) {
		t.Errorf("the demo shows the password:\n%s\n%s", r.stdout, r.stderr)
	}
}

// TestDemoKeepsOtherJobs: demo refuses (exit 1, naming --force and
// --table) a table that holds jobs it did not enqueue, even of its own kind
// and type, and keeps them; with --force it empties the table and runs.
func TestDemoKeepsOtherJobs(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		job  []string // enqueue's flags for the job that is not the demo's
	}{
		{"another kind", []string{"--name", "important", "--payload", `{"order":1}`}},
		{"the demo's kind and type, another payload", []string{"--name", "send_email", "--type", "email", "--payload", `{"to":"customer@example.com","subject":"Welcome!"}`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := cli{db: "sqlite:" + filepath.Join(t.TempDir(), "d.db"), table: "prod_jobs", timeout: 70 * time.Second}
			c.ok(t, "install")
			id := strings.TrimSpace(c.ok(t, append([]string{"enqueue"}, tc.job...)...))
			r := c.run(t, "demo")
			assertOneLineError(t, r, exitFailure, "table prod_jobs holds 1 job (1 of them not from an earlier demo)", "--table", "--force")
			if r.stdout != "" {
				t.Errorf("the refused demo printed %q", r.stdout)
			}
			c.ok(t, "show", id)
			out := c.ok(t, "demo", "--force")
			if !strings.Contains(out, "emptied it") {
				t.Errorf("demo --force did not empty the table:\n%s", out)
			}
			if r := c.run(t, "show", id); r.code == 0 {
				t.Errorf("job %s is still there after demo --force", id)
			}
		})
	}
}

// TestDemoForeignJobs: on every engine (each stores JSON its own way), the
// jobs the demo enqueues are its own, and a job of the demo's kind and
// type with another payload is not.
func TestDemoForeignJobs(t *testing.T) {
	t.Parallel()
	testdb.ForEachEngine(t, func(t *testing.T, e *testdb.Env) {
		ctx := context.Background()
		name := e.Table(t)
		if err := migrations.Install(ctx, e.DB, name); err != nil {
			t.Fatal(err)
		}
		q, err := queue.New(e.DB, queue.WithTable(name), queue.WithLogger(testdb.QuietLogger()))
		if err != nil {
			t.Fatal(err)
		}
		defer q.Close()
		check := func(wantTotal, wantForeign int64) {
			t.Helper()
			total, foreign, err := demoForeignJobs(ctx, q)
			if err != nil || total != wantTotal || foreign != wantForeign {
				t.Errorf("demoForeignJobs = %d, %d, %v; want %d, %d", total, foreign, err, wantTotal, wantForeign)
			}
		}
		check(0, 0)
		n, err := enqueueDemoJobs(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		check(int64(n), 0)
		if _, err := q.Enqueue(ctx, SendEmail{To: "customer@example.com", Subject: "Welcome!"}, queue.Type("email")); err != nil {
			t.Fatal(err)
		}
		check(int64(n)+1, 1)
		if _, err := q.Enqueue(ctx, SendEmail{To: "ada@example.com", Subject: "Welcome!"}, queue.Type("default")); err != nil {
			t.Fatal(err)
		}
		check(int64(n)+2, 2)
	})
}

// TestDemoLookCloserRuns: the command the demo prints at its end ("Look
// closer: jobqueue --db … list") runs as printed in a shell, also for a
// database whose name holds characters the shell would act on (a space, a
// '&', which sent the command to the background, and a quote); before, the
// URL was printed bare.
func TestDemoLookCloserRuns(t *testing.T) {
	t.Parallel()
	db := "sqlite:" + filepath.Join(t.TempDir(), "it's my demo&1.db")
	r := cli{db: db, timeout: 70 * time.Second}.run(t, "demo")
	if r.code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", r.code, r.stderr)
	}
	_, line, ok := strings.Cut(r.stdout, "Look closer: ")
	if !ok {
		t.Fatalf("the demo prints no \"Look closer\" command:\n%s", r.stdout)
	}
	line, _, _ = strings.Cut(line, "   (or:")
	rest, ok := strings.CutPrefix(line, "jobqueue ")
	if !ok {
		t.Fatalf("the command does not start with jobqueue: %q", line)
	}
	out, err := exec.Command("sh", "-c", shellQuote(binary)+" "+rest).CombinedOutput()
	if err != nil {
		t.Fatalf("sh -c %q: %v\n%s", line, err, out)
	}
	if !strings.Contains(string(out), "charge_card") || !strings.Contains(string(out), "flash_sale") {
		t.Errorf("%q does not list the demo's jobs:\n%s", line, out)
	}
}
