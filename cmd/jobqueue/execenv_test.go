package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestCommandEnv: a job's command starts from the worker's environment
// without the variables that may hold a password, unless --pass-env names
// them.
func TestCommandEnv(t *testing.T) {
	t.Parallel()
	environ := []string{
		"PATH=/bin",
		"JOBQUEUE_DB=postgres://u:secret@h/db",
		"JOBQUEUE_WEB_USER=admin",
		"JOBQUEUE_WEB_PASSWORD=secret",
		"JOBQUEUE_DBX=kept", // not the same name
		"HOME=/root",
	}
	cases := []struct {
		name string
		pass []string
		want []string
	}{
		{"secrets removed", nil, []string{"PATH=/bin", "JOBQUEUE_WEB_USER=admin", "JOBQUEUE_DBX=kept", "HOME=/root"}},
		{"database passed", []string{"JOBQUEUE_DB"}, []string{"PATH=/bin", "JOBQUEUE_DB=postgres://u:secret@h/db", "JOBQUEUE_WEB_USER=admin", "JOBQUEUE_DBX=kept", "HOME=/root"}},
		{"both passed", []string{"JOBQUEUE_WEB_PASSWORD", "JOBQUEUE_DB"}, environ},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := commandEnv(environ, tc.pass); !slices.Equal(got, tc.want) {
				t.Errorf("commandEnv(…, %q) = %q, want %q", tc.pass, got, tc.want)
			}
		})
	}
}

// TestWorkCommandEnv runs the worker with JOBQUEUE_DB and
// JOBQUEUE_WEB_PASSWORD in its environment: its command sees neither, and
// with --pass-env JOBQUEUE_DB sees that one; --pass-env with another name is
// a usage error.
func TestWorkCommandEnv(t *testing.T) {
	t.Parallel()
	c := sqliteCLI(t)
	c.env = []string{"JOBQUEUE_DB=" + c.db, "JOBQUEUE_WEB_PASSWORD=hunter22", "JOBQUEUE_WEB_USER=admin"}
	c.ok(t, "install")
	cases := []struct {
		name    string
		args    []string
		want    []string // lines the command's environment holds
		notWant []string // variable names it must not hold
	}{
		{"no secrets", nil, []string{"JOBQUEUE_WEB_USER=admin"}, []string{"JOBQUEUE_DB", "JOBQUEUE_WEB_PASSWORD"}},
		{"--pass-env JOBQUEUE_DB", []string{"--pass-env", "JOBQUEUE_DB"}, []string{"JOBQUEUE_DB=" + c.db, "JOBQUEUE_WEB_USER=admin"}, []string{"JOBQUEUE_WEB_PASSWORD"}},
	}
	for _, tc := range cases {
		envFile := filepath.Join(t.TempDir(), "env")
		c.ok(t, "enqueue", "--name", "env")
		c.ok(t, append([]string{"work", "--exec", "env > " + envFile, "--max-jobs", "1"}, tc.args...)...)
		b, err := os.ReadFile(envFile)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		lines := strings.Split(string(b), "\n")
		for _, w := range tc.want {
			if !slices.Contains(lines, w) {
				t.Errorf("%s: the command's environment lacks %s", tc.name, w)
			}
		}
		for _, n := range tc.notWant {
			for _, l := range lines {
				if strings.HasPrefix(l, n+"=") {
					t.Errorf("%s: the command's environment holds %s", tc.name, l)
				}
			}
		}
	}
	r := c.run(t, "work", "--exec", "true", "--pass-env", "HOME")
	assertOneLineError(t, r, exitUsage, `--pass-env "HOME"`, "JOBQUEUE_DB and JOBQUEUE_WEB_PASSWORD")
}
