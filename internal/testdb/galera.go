package testdb

import (
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// galeraProviders are where Debian's galera-4 puts the wsrep provider.
var galeraProviders = []string{"/usr/lib/galera/libgalera_smm.so", "/usr/lib/galera-4/libgalera_smm.so", "/usr/lib/libgalera_smm.so"}

// Galera starts a MariaDB Galera cluster of its own with n nodes (the
// installed mariadbd, the galera-4 provider, rsync state transfers) on free
// ports of 127.0.0.1, in temp dirs, with a database test, and stops it when
// t ends. It returns each node's URL (mysql://root@127.0.0.1:PORT/test).
// The settings Galera needs are given on each node's command line:
// binlog_format=ROW, InnoDB, innodb_autoinc_lock_mode=2, wsrep_on with the
// provider and the cluster's addresses. Without mariadbd, the provider or
// rsync the test fails in CI and is skipped elsewhere. The nodes run as
// the user postgres when the test runs as root, like the other servers.
func Galera(t testing.TB, n int) []string {
	t.Helper()
	mariadbd, err := lookBinary("mariadbd", "/usr/sbin")
	if err == nil {
		_, err = lookBinary("rsync")
	}
	var installDB string
	if err == nil {
		installDB, err = lookBinary("mariadb-install-db", "/usr/bin")
	}
	provider := ""
	for _, p := range galeraProviders {
		if _, serr := os.Stat(p); serr == nil {
			provider = p
			break
		}
	}
	if err == nil && provider == "" {
		err = fmt.Errorf("the Galera provider is not installed (apt-get install galera-4)")
	}
	if err != nil {
		needServer(t, err)
	}
	type node struct{ dir, port, gcomm, ist, sst string }
	nodes := make([]node, n)
	var cluster []string
	for i := range nodes {
		dir, err := serverDir(t, fmt.Sprintf("jobqueue-galera%d-", i+1))
		if err != nil {
			t.Fatal(err)
		}
		var ports [4]string
		for j := range ports {
			p, err := freePort()
			if err != nil {
				t.Fatal(err)
			}
			ports[j] = itoa(p)
		}
		nodes[i] = node{dir: dir, port: ports[0], gcomm: ports[1], ist: ports[2], sst: ports[3]}
		cluster = append(cluster, "127.0.0.1:"+ports[1])
	}
	data := func(i int) string { return filepath.Join(nodes[i].dir, "data") }
	if err := runAsServer(installDB, "--no-defaults", "--datadir="+data(0), "--auth-root-authentication-method=normal", "--skip-test-db"); err != nil {
		t.Fatalf("testdb: mariadb-install-db: %v", err)
	}
	urls := make([]string, n)
	start := func(i int, extra ...string) *Process {
		nd := nodes[i]
		args := append([]string{"--no-defaults", "--datadir=" + data(i), "--port=" + nd.port,
			"--socket=" + filepath.Join(nd.dir, "sock"), "--pid-file=" + filepath.Join(nd.dir, "pid"),
			"--bind-address=127.0.0.1", "--log-error=" + filepath.Join(nd.dir, "error.log"),
			"--binlog_format=ROW", "--default_storage_engine=InnoDB", "--innodb_autoinc_lock_mode=2",
			"--innodb_flush_log_at_trx_commit=0", "--innodb_buffer_pool_size=64M", "--max_connections=200",
			"--wsrep_on=ON", "--wsrep_provider=" + provider,
			"--wsrep_cluster_address=gcomm://" + strings.Join(cluster, ","),
			"--wsrep_node_address=127.0.0.1:" + nd.gcomm, fmt.Sprintf("--wsrep_node_name=node%d", i+1),
			"--wsrep_provider_options=gmcast.listen_addr=tcp://127.0.0.1:" + nd.gcomm + ";ist.recv_addr=127.0.0.1:" + nd.ist,
			"--wsrep_sst_method=rsync", "--wsrep_sst_receive_address=127.0.0.1:" + nd.sst}, extra...)
		if i > 0 {
			if err := os.MkdirAll(data(i), 0o700); err != nil {
				t.Fatal(err)
			}
			uid, gid, err := serverUser()
			if err != nil {
				t.Fatal(err)
			}
			if err := os.Chown(data(i), uid, gid); err != nil {
				t.Fatal(err)
			}
		}
		p, err := startProcess(t, fmt.Sprintf("galera node %d", i+1), exec.Command(mariadbd, args...))
		if err != nil {
			needServer(t, err)
		}
		p.stopSig = syscall.SIGTERM // mariadbd ignores SIGINT
		urls[i] = "mysql://root@127.0.0.1:" + nd.port + "/test"
		return p
	}
	procs := []*Process{start(0, "--wsrep-new-cluster")}
	if err := waitSynced(procs[0], nodes[0].port, 1, 90*time.Second); err != nil {
		t.Fatalf("testdb: galera node 1: %v (log: %s)", err, readTail(filepath.Join(nodes[0].dir, "error.log")))
	}
	for i := 1; i < n; i++ {
		procs = append(procs, start(i))
	}
	for i := 1; i < n; i++ {
		if err := waitSynced(procs[i], nodes[i].port, n, 120*time.Second); err != nil {
			t.Fatalf("testdb: galera node %d: %v (log: %s)", i+1, err, readTail(filepath.Join(nodes[i].dir, "error.log")))
		}
	}
	db, err := sql.Open("mysql", "root@tcp(127.0.0.1:"+nodes[0].port+")/")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec("CREATE DATABASE IF NOT EXISTS test"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			for i := range nodes {
				t.Logf("galera node %d error log:\n%s", i+1, readTail(filepath.Join(nodes[i].dir, "error.log")))
			}
		}
	})
	return urls
}

// waitSynced waits until the node on port is Synced in a cluster of at
// least size nodes.
func waitSynced(p *Process, port string, size int, within time.Duration) error {
	db, err := sql.Open("mysql", "root@tcp(127.0.0.1:"+port+")/?timeout=2s")
	if err != nil {
		return err
	}
	defer db.Close()
	deadline := time.Now().Add(within)
	for {
		var name, state, members string
		err := db.QueryRow("SHOW STATUS LIKE 'wsrep_local_state_comment'").Scan(&name, &state)
		if err == nil {
			err = db.QueryRow("SHOW STATUS LIKE 'wsrep_cluster_size'").Scan(&name, &members)
		}
		if m, _ := strconv.Atoi(members); err == nil && state == "Synced" && m >= size {
			return nil
		}
		if p.Exited() {
			return fmt.Errorf("it exited: %s", tail(p.Output(), 2000))
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not synced in a cluster of %d after %v (state %q, size %q, %v)", size, within, state, members, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// readTail is the end of a log file, or why it cannot be read.
func readTail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	return tail(string(b), 4000)
}
