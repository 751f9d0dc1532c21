package testdb

import (
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jobqueue/jobqueue/internal/engine"
)

// PgBouncer starts a PgBouncer of its own in transaction pooling mode, on a
// free port of 127.0.0.1, with at most poolSize server connections, in
// front of the PostgreSQL test server (see URL), and stops it when t ends.
// It returns the test server's URL with the host and port of the
// PgBouncer; pgx needs default_query_exec_mode=exec added to it there.
// Without the pgbouncer binary (Debian: apt-get install pgbouncer) the test
// fails in CI and is skipped elsewhere; so it is when the test server
// cannot be reached. A PgBouncer that exits while the test runs fails the
// test.
func PgBouncer(t testing.TB, poolSize int) string {
	t.Helper()
	upstream := URL(t, engine.Postgres)
	OpenURL(t, upstream) // skips or fails the test if the server is down
	bin, err := lookBinary("pgbouncer", "/usr/sbin", "/usr/local/sbin")
	if err != nil {
		needServer(t, fmt.Errorf("%w; install it (apt-get install pgbouncer)", err))
	}
	u, err := url.Parse(upstream)
	if err != nil {
		t.Fatalf("testdb: the PostgreSQL test URL: %v", err)
	}
	dir, err := serverDir(t, "jobqueue-pgbouncer-")
	if err != nil {
		t.Fatalf("testdb: PgBouncer's directory: %v", err)
	}
	host, port := u.Hostname(), u.Port()
	if port == "" {
		port = "5432"
	}
	user, password := "postgres", ""
	if u.User != nil {
		user = u.User.Username()
		password, _ = u.User.Password()
	}
	quote := func(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }
	users := filepath.Join(dir, "users.txt")
	if err := writeServerFile(users, quote(user)+" "+quote(password)+"\n"); err != nil {
		t.Fatal(err)
	}
	// A port found free may be taken by the time PgBouncer binds it (other
	// tests start servers too): try a few.
	var lastErr error
	for range 5 {
		listen, err := freePort()
		if err != nil {
			t.Fatal(err)
		}
		conf := filepath.Join(dir, "pgbouncer.ini")
		err = writeServerFile(conf, fmt.Sprintf(`[databases]
* = host=%s port=%s

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = %d
unix_socket_dir =
auth_type = trust
auth_file = %s
pool_mode = transaction
default_pool_size = %d
max_client_conn = 1000
ignore_startup_parameters = extra_float_digits
log_connections = 0
log_disconnections = 0
`, host, port, listen, users, poolSize))
		if err != nil {
			t.Fatal(err)
		}
		p, err := startProcess(t, "pgbouncer", exec.Command(bin, conf))
		if err != nil {
			needServer(t, err)
		}
		addr := net.JoinHostPort("127.0.0.1", itoa(listen))
		if lastErr = p.waitTCP(addr, 10*time.Second); lastErr == nil {
			u.Host = addr
			return u.String()
		}
		p.Stop(os.Interrupt, 5*time.Second)
	}
	t.Fatalf("testdb: PgBouncer did not start: %v", lastErr)
	return ""
}
