package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jobqueue/jobqueue/migrations"
)

// TestGooseFilePrintsAndWrites: goose-file prints GooseSQL's text for each
// engine, and with --dir writes it as <version>_jobqueue_<table>.sql, the
// version defaulting to the current UTC time; PostgreSQL's folded name is
// the one in the file's name. (migrations' TestGooseCommandRunsGooseSQL
// runs the text through the goose command.)
func TestGooseFilePrintsAndWrites(t *testing.T) {
	t.Parallel()
	for _, e := range []string{"postgres", "mysql", "sqlite"} {
		t.Run(e, func(t *testing.T) {
			t.Parallel()
			want, err := migrations.GooseSQL(e, "Queue_Jobs")
			if err != nil {
				t.Fatal(err)
			}
			c := cli{table: "Queue_Jobs"}
			if got := c.ok(t, "goose-file", "--engine", e); got != want {
				t.Errorf("printed file differs from migrations.GooseSQL:\n%s\nwant:\n%s", got, want)
			}

			dir := t.TempDir()
			fileTable := "Queue_Jobs"
			if e == "postgres" {
				fileTable = "queue_jobs"
			}
			out := c.ok(t, "goose-file", "--engine", e, "--version", "42", "--dir", dir)
			path := filepath.Join(dir, "42_jobqueue_"+fileTable+".sql")
			if strings.TrimSpace(out) != path {
				t.Errorf("stdout %q, want the path %s", out, path)
			}
			if b, err := os.ReadFile(path); err != nil || string(b) != want {
				t.Errorf("written file: %v\n%s\nwant:\n%s", err, b, want)
			}

			before := time.Now().UTC().Truncate(time.Second)
			out = c.ok(t, "goose-file", "--engine", e, "--dir", dir)
			after := time.Now().UTC()
			m := regexp.MustCompile(`/(\d{14})_jobqueue_` + fileTable + `\.sql\n$`).FindStringSubmatch(out)
			if m == nil {
				t.Fatalf("stdout %q: want DIR/YYYYMMDDhhmmss_jobqueue_%s.sql", out, fileTable)
			}
			v, err := time.Parse("20060102150405", m[1])
			if err != nil || v.Before(before) || v.After(after) {
				t.Errorf("default version %s (%v): want the UTC time between %v and %v", m[1], err, before, after)
			}
			entries, err := os.ReadDir(dir)
			if err != nil || len(entries) != 2 {
				t.Errorf("dir has %d files (%v), want 2", len(entries), err)
			}
		})
	}
}

// TestGooseFileRejectsBadInput: every bad input is one line on stderr,
// exit 2 for usage and 1 for a directory it cannot write to, and nothing
// is written or changed.
func TestGooseFileRejectsBadInput(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	existing := filepath.Join(dir, "7_jobqueue_jobs.sql")
	if err := os.WriteFile(existing, []byte("-- mine\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(dir, "0009_add_users.sql")
	if err := os.WriteFile(other, []byte("-- theirs\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	notDir := filepath.Join(dir, "file")
	if err := os.WriteFile(notDir, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		args []string
		code int
		want []string
	}{
		{"no --engine", []string{"goose-file"}, 2, []string{`"engine" not set`}},
		{"unknown engine", []string{"goose-file", "--engine", "oracle", "--dir", dir}, 2, []string{`--engine "oracle"`, "postgres, mysql"}},
		{"bad table name", []string{"--table", "jobs;drop", "goose-file", "--engine", "sqlite", "--dir", dir}, 2, []string{"invalid table name", "jobs;drop"}},
		{"51 characters on postgres", []string{"--table", strings.Repeat("a", 51), "goose-file", "--engine", "postgres", "--dir", dir}, 2, []string{"invalid table name", "at most 50"}},
		{"version not a number", []string{"goose-file", "--engine", "sqlite", "--version", "v1", "--dir", dir}, 2, []string{`--version "v1"`, "positive whole number"}},
		{"version zero", []string{"goose-file", "--engine", "sqlite", "--version", "0", "--dir", dir}, 2, []string{`--version "0"`}},
		{"version negative", []string{"goose-file", "--engine", "sqlite", "--version", "-3", "--dir", dir}, 2, []string{`--version "-3"`}},
		{"version with a sign", []string{"goose-file", "--engine", "sqlite", "--version", "+3", "--dir", dir}, 2, []string{`--version "+3"`}},
		{"version past int64", []string{"goose-file", "--engine", "sqlite", "--version", "99999999999999999999", "--dir", dir}, 2, []string{"--version"}},
		{"missing dir", []string{"goose-file", "--engine", "sqlite", "--dir", filepath.Join(dir, "nope")}, 1, []string{"does not exist", "create it"}},
		{"dir is a file", []string{"goose-file", "--engine", "sqlite", "--dir", notDir}, 1, []string{"not a directory"}},
		{"existing file", []string{"goose-file", "--engine", "sqlite", "--version", "7", "--dir", dir}, 1, []string{existing, "exists already"}},
		{"version taken by another file", []string{"goose-file", "--engine", "sqlite", "--version", "9", "--dir", dir}, 1, []string{"0009_add_users.sql", "choose another --version"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := cli{}.run(t, c.args...)
			assertOneLineError(t, r, c.code, c.want...)
			if r.stdout != "" {
				t.Errorf("stdout %q, want nothing", r.stdout)
			}
		})
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if strings.Join(names, " ") != "0009_add_users.sql 7_jobqueue_jobs.sql file" {
		t.Errorf("dir holds %v; want only the three files the test made", names)
	}
	if b, err := os.ReadFile(existing); err != nil || string(b) != "-- mine\n" {
		t.Errorf("existing file now %q (%v); want it unchanged", b, err)
	}
	// The control: a free version in the same dir is written.
	cli{}.ok(t, "goose-file", "--engine", "sqlite", "--version", "8", "--dir", dir)
	if _, err := os.Stat(filepath.Join(dir, "8_jobqueue_jobs.sql")); err != nil {
		t.Errorf("control: %v", err)
	}
}

// TestGooseFileVersionOnlyOfMigrations: --dir refuses a version only when
// a file goose reads as a migration has it (.sql, or .go but not _test.go);
// a note or a test file whose name starts with the same number is no
// migration, and goose-file refused it ("already has migration
// 42_notes.md").
func TestGooseFileVersionOnlyOfMigrations(t *testing.T) {
	t.Parallel()
	cases := []struct {
		other string // a file in --dir
		taken bool   // whether it holds version 42 for goose
	}{
		{"42_notes.md", false},
		{"42_helpers_test.go", false},
		{"42_backup.sql.bak", false},
		{"42_add_users.go", true},
		{"0042_add_users.sql", true},
	}
	for _, c := range cases {
		t.Run(c.other, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, c.other), []byte("x\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			r := cli{}.run(t, "goose-file", "--engine", "sqlite", "--version", "42", "--dir", dir)
			_, err := os.Stat(filepath.Join(dir, "42_jobqueue_jobs.sql"))
			if c.taken {
				assertOneLineError(t, r, exitFailure, c.other, "choose another --version")
				if err == nil {
					t.Errorf("the file was written next to %s", c.other)
				}
				return
			}
			if r.code != 0 || err != nil {
				t.Errorf("goose-file next to %s: exit %d, %s, file: %v; want it written", c.other, r.code, r.stderr, err)
			}
		})
	}
}
