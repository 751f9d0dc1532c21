package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jobqueue/jobqueue/internal/testdb"
	"github.com/jobqueue/jobqueue/queue"
)

// TestEnqueuePayloadFromInput: `enqueue --payload -` reads the payload
// from stdin (also `@-`, as curl) and `--payload @FILE` from a file; a
// literal is still a literal, even one starting with '-' (a negative
// number) or a JSON string holding '@'. The job gets the payload read, on
// every engine. (--payload took only literal JSON: "-" and "@FILE" were
// refused as invalid JSON.)
func TestEnqueuePayloadFromInput(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, content string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	pretty := write("pretty.json", "{\n  \"to\": \"a@example.com\",\n  \"n\": [1, 2]\n}\n")
	spaced := write("with space.json", `"@home"`)
	cases := []struct {
		name    string
		payload string // the --payload value
		stdin   string
		want    string // the stored payload, compacted
	}{
		{"stdin", "-", `{"to":"a@example.com"}` + "\n", `{"to":"a@example.com"}`},
		{"stdin as curl's @-", "@-", `[1,2,3]`, `[1,2,3]`},
		{"file", "@" + pretty, "", `{"n":[1,2],"to":"a@example.com"}`},
		{"file whose name has a space", "@" + spaced, "", `"@home"`},
		{"literal negative number", "-1", "", `-1`},
		{"literal string starting with @", `"@home"`, "", `"@home"`},
		{"literal object, stdin ignored", `{"a":1}`, `{"b":2}`, `{"a":1}`},
	}
	testdb.ForEachEngine(t, func(t *testing.T, e *testdb.Env) {
		c := envCLI(t, e)
		c.ok(t, "install")
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				in := c
				in.stdin = tc.stdin
				id := strings.TrimSpace(in.ok(t, "enqueue", "--name", "k", "--payload", tc.payload))
				var job jobJSON
				decodeJSON(t, c.ok(t, "show", id, "--json"), &job)
				if got := compactJSON(t, job.Payload); got != compactJSON(t, []byte(tc.want)) {
					t.Errorf("--payload %s: payload %s, want %s", tc.payload, job.Payload, tc.want)
				}
			})
		}
	})
}

// TestEnqueuePayloadInputErrors: a payload from stdin or a file that cannot
// be read, is empty, or is not JSON (or not UTF-8) is a usage error (exit
// 2, one line) that says where the payload came from and what to do,
// before the database is opened: nothing is enqueued.
func TestEnqueuePayloadInputErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name string, content []byte) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, content, 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	missing := filepath.Join(dir, "missing.json")
	empty := write("empty.json", nil)
	blank := write("blank.json", []byte(" \n\t\n"))
	broken := write("broken.json", []byte("{\n  \"to\": \"a@example.com\",\n}\n"))
	latin1 := write("latin1.json", []byte("{\"name\":\"Jos\xe9\"}"))
	bom := write("bom.json", append([]byte("\xef\xbb\xbf"), `{"a":1}`...))
	unreadable := write("unreadable.json", []byte(`{}`))
	if err := os.Chmod(unreadable, 0); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name    string
		payload string
		stdin   string
		want    []string // substrings of the error line
		root    bool     // the case cannot fail for root (file permissions)
	}{
		{"missing file", "@" + missing, "", []string{"--payload @" + missing, "cannot read the file", "no such file", `--payload '"@`}, false},
		{"directory", "@" + dir, "", []string{"--payload @" + dir, "cannot read the file", "is a directory"}, false},
		{"unreadable file", "@" + unreadable, "", []string{"cannot read the file", "permission denied"}, true},
		{"no file name", "@", "", []string{"--payload @ names no file", "--payload @FILE", "--payload -"}, false},
		{"literal starting with @", "@home", "", []string{"--payload @home", "cannot read the file home", `--payload '"@home"'`}, false},
		{"empty stdin", "-", "", []string{"--payload -", "stdin is empty", "leave --payload out for {}"}, false},
		{"blank stdin", "@-", " \n", []string{"--payload @-", "stdin is empty"}, false},
		{"empty file", "@" + empty, "", []string{"the file " + empty + " is empty"}, false},
		{"blank file", "@" + blank, "", []string{"the file " + blank + " is empty"}, false},
		{"invalid JSON on stdin", "-", "{\"to\":\n nope}", []string{"--payload -", "stdin does not hold valid JSON", "at line 2, column 3"}, false},
		{"invalid JSON in a file", "@" + broken, "", []string{"the file " + broken + " does not hold valid JSON", "at line 3, column 1"}, false},
		{"two values on stdin", "-", `{} {}`, []string{"stdin does not hold valid JSON"}, false},
		{"file not UTF-8", "@" + latin1, "", []string{"the file " + latin1 + " is not valid UTF-8", "save it as UTF-8"}, false},
		{"literal not UTF-8", "{\"name\":\"Jos\xe9\"}", "", []string{"--payload", "not valid UTF-8"}, false},
		{"file with a byte order mark", "@" + bom, "", []string{"the file " + bom + " starts with a byte order mark", "without one"}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if tc.root && os.Geteuid() == 0 {
				t.Skip("root reads a file whatever its permissions")
			}
			dbFile := filepath.Join(t.TempDir(), "never.db")
			r := cli{db: "sqlite:" + dbFile, stdin: tc.stdin}.run(t, "enqueue", "--name", "k", "--payload", tc.payload)
			assertOneLineError(t, r, exitUsage, tc.want...)
			if r.stdout != "" {
				t.Errorf("stdout is not empty: %q", r.stdout)
			}
			if _, err := os.Stat(dbFile); err == nil {
				t.Errorf("the refused payload opened the database %s", dbFile)
			}
		})
	}
}

// compactJSON is b without its insignificant spaces, object keys sorted
// (engines may re-space and reorder JSON).
func compactJSON(t *testing.T, b []byte) string {
	t.Helper()
	var v any
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	if err := d.Decode(&v); err != nil {
		t.Fatalf("not JSON (%v): %q", err, b)
	}
	out, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// TestEnqueueFlagErrorsBeforeStdin: with --payload -, a mistake in another
// flag is told at once, before stdin is read: it waited for a stdin that
// nothing wrote to (a terminal) before saying that --at and --delay
// clash.
func TestEnqueueFlagErrorsBeforeStdin(t *testing.T) {
	t.Parallel()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close() // open until the end: stdin never ends
	dbFile := filepath.Join(t.TempDir(), "never.db")
	cmd := exec.Command(binary, "--db", "sqlite:"+dbFile, "enqueue", "--name", "k", "--payload", "-", "--at", "2030-01-01T00:00:00Z", "--delay", "1m")
	cmd.Stdin = r
	stderr := startCmd(t, cmd)
	code := waitExit(t, cmd, 30*time.Second)
	assertOneLineError(t, result{code: code, stderr: stderr.String()}, exitUsage, "--at and --delay")
}

// TestEnqueuePayloadSizeBound: a payload read from stdin or a file is read
// up to queue.MaxPayloadSize and no further: a larger one (an endless
// --payload @/dev/zero too) is a usage error naming the bound, before the
// database is opened, and one of exactly the bound is enqueued on every
// engine. (The whole input was read into memory: @/dev/zero read until
// memory ran out.)
func TestEnqueuePayloadSizeBound(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	// A JSON string of n bytes, quotes included.
	jsonOf := func(n int) string { return `"` + strings.Repeat("a", n-2) + `"` }
	big := filepath.Join(dir, "big.json")
	if err := os.WriteFile(big, []byte(jsonOf(queue.MaxPayloadSize+1)), 0o644); err != nil {
		t.Fatal(err)
	}
	limit := fmt.Sprintf("%d bytes", queue.MaxPayloadSize)
	cases := []struct {
		name, payload, stdin string
		want                 []string
	}{
		{"endless file", "@/dev/zero", "", []string{"--payload @/dev/zero", "the file /dev/zero", "larger than", limit}},
		{"file one byte over", "@" + big, "", []string{"the file " + big, "larger than", limit}},
		{"stdin one byte over", "-", jsonOf(queue.MaxPayloadSize + 1), []string{"--payload -", "stdin", "larger than", limit}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dbFile := filepath.Join(t.TempDir(), "never.db")
			r := cli{db: "sqlite:" + dbFile, stdin: tc.stdin, timeout: 30 * time.Second}.run(t, "enqueue", "--name", "k", "--payload", tc.payload)
			assertOneLineError(t, r, exitUsage, tc.want...)
			if _, err := os.Stat(dbFile); err == nil {
				t.Errorf("the refused payload opened the database %s", dbFile)
			}
		})
	}
	testdb.ForEachEngine(t, func(t *testing.T, e *testdb.Env) {
		c := envCLI(t, e)
		c.ok(t, "install")
		c.stdin = jsonOf(queue.MaxPayloadSize)
		id := strings.TrimSpace(c.ok(t, "enqueue", "--name", "k", "--payload", "-"))
		if id == "" {
			t.Fatal("no id printed for a payload of exactly the bound")
		}
	})
}

// TestEnqueuePayloadNULOnPostgres: a payload holding the escape \u0000,
// which PostgreSQL's JSONB cannot store (SPEC 3), is a usage error in the
// queue's words before connecting when the URL is a PostgreSQL one: here
// no server listens, and the refusal came only from the server's queue
// (a connection failure, exit 1, when it was down). An escaped backslash
// before u0000 is text, not the escape; SQLite stores the escape.
func TestEnqueuePayloadNULOnPostgres(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "nul.json")
	if err := os.WriteFile(file, []byte(`{"a":"x\u0000"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	down := "postgres://postgres@127.0.0.1:1/test?sslmode=disable&connect_timeout=5"
	want := `contains \u0000, which PostgreSQL's JSONB cannot store`
	cases := []struct {
		name, payload, stdin string
		code                 int
		want                 []string
	}{
		{"literal", `{"a":"\u0000"}`, "", exitUsage, []string{"--payload", want}},
		{"stdin", "-", `["\u0000"]`, exitUsage, []string{"--payload -", want}},
		{"file", "@" + file, "", exitUsage, []string{"--payload @" + file, want}},
		{"escaped backslash", `{"a":"\\u0000"}`, "", exitFailure, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := cli{db: down, stdin: tc.stdin}.run(t, "enqueue", "--name", "k", "--payload", tc.payload)
			assertOneLineError(t, r, tc.code, tc.want...)
		})
	}
	t.Run("sqlite stores it", func(t *testing.T) {
		t.Parallel()
		c := sqliteCLI(t)
		c.ok(t, "install")
		c.ok(t, "enqueue", "--name", "k", "--payload", `{"a":"\u0000"}`)
	})
}
