package main

import (
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/testdb"
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
