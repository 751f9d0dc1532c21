package engine_test

import (
	"context"
	"encoding/binary"
	"io"
	"net"
	"net/url"
	"testing"
	"time"

	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/testdb"
)

// TestNoCancelRequests: a query whose context ends is cancelled with a
// cancel request in pgx's default mode, and with default_query_exec_mode=exec
// (the mode for a transaction pooler) its connection is closed and no
// cancel request is sent at all: the one connection pgx dials for it closes
// before a byte is written. A proxy in front of PostgreSQL tells the
// connections apart by their first message.
func TestNoCancelRequests(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, query string
		want        string // what the connection dialed for the cancel sent
	}{
		{"cache_statement", "", "cancel request"},
		{"exec", "default_query_exec_mode=exec", "nothing"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			u, err := url.Parse(testdb.URL(t, engine.Postgres))
			if err != nil {
				t.Fatal(err)
			}
			extra := make(chan string, 8)
			u.Host = startClassifyingProxy(t, u.Host, extra)
			if c.query != "" {
				u.RawQuery += "&" + c.query
			}
			db := testdb.OpenURL(t, u.String())
			db.SetMaxOpenConns(1)
			if got := <-extra; got != "session" {
				t.Fatalf("the first connection sent %s, want a session's startup", got)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
			defer cancel()
			if _, err := db.ExecContext(ctx, "SELECT pg_sleep(5)"); err == nil {
				t.Fatal("pg_sleep(5) under a 200 ms context returned no error")
			}
			select {
			case got := <-extra:
				if got != c.want {
					t.Errorf("the connection dialed to cancel the query sent %s, want %s", got, c.want)
				}
			case <-time.After(20 * time.Second):
				t.Fatalf("no connection was dialed to cancel the query in 20 s, want one that sends %s", c.want)
			}
		})
	}
}

// startClassifyingProxy listens on a free local port and forwards each
// connection to target, saying on seen what its first message was: a
// session's startup, a cancel request, or nothing before it closed. It
// returns the proxy's host:port.
func startClassifyingProxy(t *testing.T, target string, seen chan<- string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			client, err := ln.Accept()
			if err != nil {
				return // the listener is closed
			}
			go func() {
				defer client.Close()
				head := make([]byte, 8)
				if _, err := io.ReadFull(client, head); err != nil {
					seen <- "nothing"
					return
				}
				if binary.BigEndian.Uint32(head[4:8]) == 80877102 {
					seen <- "cancel request"
				} else {
					seen <- "session"
				}
				server, err := net.Dial("tcp", target)
				if err != nil {
					return // the client sees its connection end, and says so
				}
				defer server.Close()
				if _, err := server.Write(head); err != nil {
					return
				}
				go func() { io.Copy(server, client); server.Close() }()
				io.Copy(client, server)
			}()
		}
	}()
	return ln.Addr().String()
}
