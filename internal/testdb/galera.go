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
	nodes := make([]galeraNode, n)
	var cluster []string
	for i := range nodes {
		dir, err := serverDir(t, fmt.Sprintf("jobqueue-galera%d-", i+1))
		if err != nil {
			t.Fatal(err)
		}
		nodes[i] = galeraNode{dir: dir}
		nodes[i].pickPorts(t)
		cluster = append(cluster, "127.0.0.1:"+nodes[i].gcomm)
	}
	data := func(i int) string { return filepath.Join(nodes[i].dir, "data") }
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
	// The first node, which starts the cluster, starts again on new ports
	// and a new data dir too when it exits before it is Synced: one of its
	// ports may be taken between the pick and the bind as well (the race
	// detector's run saw "Bind on TCP/IP port ... Address already in use"
	// while another test's cluster started).
	var procs []*Process
	for try := 1; ; try++ {
		if err := installGaleraDB(t, installDB, nodes[0].dir, data(0)); err != nil {
			t.Fatalf("testdb: mariadb-install-db: %v", err)
		}
		p := start(0, "--wsrep-new-cluster")
		err := waitSynced(p, nodes[0].port, 1, 90*time.Second)
		if err == nil {
			procs = append(procs, p)
			break
		}
		if !p.Exited() || try == galeraJoinTries {
			t.Fatalf("testdb: galera node 1 (try %d): %v (log: %s)", try, err, readTail(filepath.Join(nodes[0].dir, "error.log")))
		}
		t.Logf("testdb: galera node 1 exited while starting the cluster (try %d of %d); starting it again on new ports: %v (log: %s)",
			try, galeraJoinTries, err, readTail(filepath.Join(nodes[0].dir, "error.log")))
		p.Stop(syscall.SIGTERM, time.Second) // it exited: only marks it stopped, so the test does not fail for it
		if err := os.RemoveAll(data(0)); err != nil {
			t.Fatal(err)
		}
		nodes[0].pickPorts(t)
		cluster[0] = "127.0.0.1:" + nodes[0].gcomm
	}
	// The joiners start one at a time, each once the one before has its
	// state: a node that asks for a state transfer while the only donor is
	// busy with another's gets none and exits (CI saw node 3 do so while
	// node 1 was the donor of node 2).
	// A joiner whose state transfer could not start exits: the ports it
	// was given were free when picked, but another test's connection may
	// take one before the node binds it (the full test run saw the rsync
	// daemon of node 2's transfer fail so, "Device or resource busy").
	// Such a joiner starts again, on new ports and an empty data dir, up
	// to galeraJoinTries times; the cluster's address list still names the
	// first node, which is all a joiner needs.
	for i := 1; i < n; i++ {
		for try := 1; ; try++ {
			p := start(i)
			err := waitSynced(p, nodes[i].port, i+1, 120*time.Second)
			if err == nil {
				procs = append(procs, p)
				break
			}
			if !p.Exited() || try == galeraJoinTries {
				t.Fatalf("testdb: galera node %d (try %d): %v (log: %s)", i+1, try, err, readTail(filepath.Join(nodes[i].dir, "error.log")))
			}
			t.Logf("testdb: galera node %d exited while joining (try %d of %d); starting it again on new ports: %v (log: %s)",
				i+1, try, galeraJoinTries, err, readTail(filepath.Join(nodes[i].dir, "error.log")))
			p.Stop(syscall.SIGTERM, time.Second) // it exited: only marks it stopped, so the test does not fail for it
			if err := os.RemoveAll(data(i)); err != nil {
				t.Fatal(err)
			}
			nodes[i].pickPorts(t)
		}
	}
	// Every node, the first too (it was the donor of the state transfers
	// meanwhile), must be ready and Synced in the whole cluster before the
	// test starts: a node accepts connections before it is ready, and a
	// statement then fails with "WSREP has not yet prepared node for
	// application use". A node seen Synced may leave that state while a
	// later one joins (it becomes a donor), so the nodes are waited for in
	// turn until one pass finds them all Synced at once.
	deadline := time.Now().Add(180 * time.Second)
	for synced := false; !synced; {
		for i := range procs {
			if err := waitSynced(procs[i], nodes[i].port, n, time.Until(deadline)); err != nil {
				t.Fatalf("testdb: galera node %d: %v (log: %s)", i+1, err, readTail(filepath.Join(nodes[i].dir, "error.log")))
			}
		}
		synced = true
		for i := range procs {
			if waitSynced(procs[i], nodes[i].port, n, 0) != nil { // one look
				synced = false
			}
		}
	}
	if err := createTestDB(nodes[0].port); err != nil {
		t.Fatalf("testdb: galera node 1: %v", err)
	}
	for i := range procs {
		if err := waitSchema(procs[i], nodes[i].port, "test", 30*time.Second); err != nil {
			t.Fatalf("testdb: galera node %d: %v (log: %s)", i+1, err, readTail(filepath.Join(nodes[i].dir, "error.log")))
		}
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

// installGaleraDB makes the first node's data dir with mariadb-install-db,
// its temporary files in the node's own dir; a failed run is tried again
// on an empty data dir, up to galeraJoinTries times (CI saw it fail now
// and then, two clusters starting at once, on a temporary table in /tmp
// that was gone when it dropped it: "Unknown table 'mysql.tmp_user_sys'").
func installGaleraDB(t testing.TB, installDB, dir, data string) error {
	t.Helper()
	tmp := filepath.Join(dir, "tmp")
	var err error
	for try := 1; try <= galeraJoinTries; try++ {
		if try > 1 {
			t.Logf("testdb: mariadb-install-db failed (try %d of %d), trying again: %v", try-1, galeraJoinTries, err)
		}
		for _, d := range []string{data, tmp} {
			if err := os.RemoveAll(d); err != nil {
				return err
			}
		}
		if err = os.MkdirAll(tmp, 0o700); err != nil {
			return err
		}
		uid, gid, uerr := serverUser()
		if uerr != nil {
			return uerr
		}
		if err = os.Chown(tmp, uid, gid); err != nil {
			return err
		}
		err = runAsServer(installDB, "--no-defaults", "--datadir="+data, "--tmpdir="+tmp,
			"--auth-root-authentication-method=normal", "--skip-test-db")
		if err == nil {
			return nil
		}
	}
	return err
}

// galeraJoinTries is how many times Galera starts a node that exits
// before it is Synced (the first node, and each joiner).
const galeraJoinTries = 3

// galeraNode is one node of a test cluster: its temp dir and its ports
// (client, group communication, incremental and full state transfer).
type galeraNode struct{ dir, port, gcomm, ist, sst string }

// pickPorts gives the node four free ports.
func (nd *galeraNode) pickPorts(t testing.TB) {
	t.Helper()
	var ports [4]string
	for j := range ports {
		p, err := freePort()
		if err != nil {
			t.Fatal(err)
		}
		ports[j] = itoa(p)
	}
	nd.port, nd.gcomm, nd.ist, nd.sst = ports[0], ports[1], ports[2], ports[3]
}

// createTestDB creates the database test on the node on port; Galera
// replicates it to the other nodes.
func createTestDB(port string) error {
	db, err := sql.Open("mysql", "root@tcp(127.0.0.1:"+port+")/?timeout=2s")
	if err != nil {
		return err
	}
	defer db.Close()
	if _, err := db.Exec("CREATE DATABASE IF NOT EXISTS test"); err != nil {
		return fmt.Errorf("creating the database test: %w", err)
	}
	return nil
}

// waitSynced waits until the node on port is ready for statements
// (wsrep_ready ON) and Synced in a cluster of at least size nodes.
func waitSynced(p *Process, port string, size int, within time.Duration) error {
	return pollNode(p, port, within, func(db *sql.DB) error {
		st, err := wsrepStatus(db, "wsrep_ready", "wsrep_local_state_comment", "wsrep_cluster_size")
		if err != nil {
			return err
		}
		if members, _ := strconv.Atoi(st["wsrep_cluster_size"]); st["wsrep_ready"] != "ON" || st["wsrep_local_state_comment"] != "Synced" || members < size {
			return fmt.Errorf("not ready and synced in a cluster of %d: status %v", size, st)
		}
		return nil
	})
}

// wsrepStatus reads the named status variables of db's node.
func wsrepStatus(db *sql.DB, names ...string) (map[string]string, error) {
	st := make(map[string]string, len(names))
	for _, v := range names {
		var name, value string
		if err := db.QueryRow("SHOW STATUS LIKE '"+v+"'").Scan(&name, &value); err != nil {
			return st, fmt.Errorf("SHOW STATUS LIKE '%s': %w", v, err)
		}
		st[v] = value
	}
	return st, nil
}

// waitSchema waits until the node on port has the database schema (a
// database created on another node is applied here a little later).
func waitSchema(p *Process, port, schema string, within time.Duration) error {
	return pollNode(p, port, within, func(db *sql.DB) error {
		var n int
		if err := db.QueryRow("SELECT COUNT(*) FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = ?", schema).Scan(&n); err != nil {
			return err
		}
		if n != 1 {
			return fmt.Errorf("database %s not there", schema)
		}
		return nil
	})
}

// pollNode runs check on the node on port every 200 ms until it returns
// nil. It fails when the node exits, or when within has passed, with
// check's last error.
func pollNode(p *Process, port string, within time.Duration, check func(db *sql.DB) error) error {
	db, err := sql.Open("mysql", "root@tcp(127.0.0.1:"+port+")/?timeout=2s")
	if err != nil {
		return err
	}
	defer db.Close()
	deadline := time.Now().Add(within)
	for {
		err := check(db)
		if err == nil {
			return nil
		}
		if p.Exited() {
			return fmt.Errorf("it exited: %s", tail(p.Output(), 2000))
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("after %v: %w", within, err)
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
