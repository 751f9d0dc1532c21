package testdb

import (
	"path/filepath"
	"testing"
)

// PostgresServer initialises (initdb) and starts a PostgreSQL instance of
// the test's own in a temp dir on a free port of 127.0.0.1, with
// PostgreSQL's own settings but for the settings (name=value) given, and
// stops it when t ends. Unlike the shared test server, whose autovacuum is
// off, it runs autovacuum as PostgreSQL does by default: for tests that
// need the server to behave as a deployment's does over a long run (the
// soak). Without the server binaries the test fails in CI and is skipped
// elsewhere.
func PostgresServer(t testing.TB, settings ...string) *PGServer {
	t.Helper()
	bin, err := postgresBin()
	if err != nil {
		needServer(t, err)
	}
	dir, err := serverDir(t, "jobqueue-pg-")
	if err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(dir, "data")
	if err := runAsServer(filepath.Join(bin, "initdb"), "-D", data, "-U", "postgres", "--auth=trust", "--no-sync", "-E", "UTF8", "--locale=C"); err != nil {
		t.Fatalf("testdb: initdb: %v", err)
	}
	var extra []string
	for _, s := range settings {
		extra = append(extra, "-c", s)
	}
	return startPostgres(t, bin, "server", data, extra...)
}
