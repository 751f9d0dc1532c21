package testdb

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/jobqueue/jobqueue/internal/engine"
)

// Outage is a TCP proxy of the test's own between a pool and the test
// server of one engine, which the test can take down as a server restart
// or a network failure does: Cut closes every connection through it and
// refuses new ones, Restore accepts them again. The server itself, shared
// with the other tests, stays up.
type Outage struct {
	t        testing.TB
	addr     string // the proxy's address, 127.0.0.1:port
	upstream string // the server's host:port

	mu    sync.Mutex
	ln    net.Listener // nil while cut
	conns map[net.Conn]bool
	lose  bool // the server's bytes are dropped (LoseReplies)
	// marker, when set, sets lose once a client sends it (LoseRepliesAfter).
	marker []byte
	done   sync.WaitGroup
}

// NewOutage starts a proxy on a free port of 127.0.0.1 in front of the test
// server of engine k (PostgreSQL or MySQL), and stops it when t ends. It
// returns the proxy and the test server's URL through it.
func NewOutage(t testing.TB, k engine.Kind) (*Outage, string) {
	t.Helper()
	rawURL := URL(t, k)
	OpenURL(t, rawURL) // skips or fails the test if the server is down
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatalf("testdb: the %s test URL: %v", k, err)
	}
	o := &Outage{t: t, upstream: u.Host, conns: map[net.Conn]bool{}}
	if !strings.Contains(o.upstream, ":") {
		o.upstream = net.JoinHostPort(o.upstream, map[engine.Kind]string{engine.Postgres: "5432", engine.MySQL: "3306"}[k])
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("testdb: the outage proxy: %v", err)
	}
	o.addr = ln.Addr().String()
	o.serve(ln)
	t.Cleanup(func() {
		o.Cut()
		o.done.Wait()
	})
	u.Host = o.addr
	return o, u.String()
}

// serve accepts connections on ln until it is closed.
func (o *Outage) serve(ln net.Listener) {
	o.mu.Lock()
	o.ln = ln
	o.mu.Unlock()
	o.done.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return // closed by Cut
			}
			o.proxy(c)
		}
	})
}

// proxy joins the client connection c to a new connection to the server.
func (o *Outage) proxy(c net.Conn) {
	s, err := net.Dial("tcp", o.upstream)
	if err != nil {
		c.Close()
		return
	}
	o.mu.Lock()
	if o.ln == nil { // cut meanwhile
		o.mu.Unlock()
		c.Close()
		s.Close()
		return
	}
	o.conns[c], o.conns[s] = true, true
	o.mu.Unlock()
	pipe := func(dst io.Writer, src net.Conn) {
		_, err := io.Copy(dst, src)
		if err != nil && !errors.Is(err, net.ErrClosed) {
			o.t.Logf("testdb: outage proxy: %v", err)
		}
		// Either side's end ends both, as a server's end does.
		c.Close()
		s.Close()
		o.mu.Lock()
		delete(o.conns, c)
		delete(o.conns, s)
		o.mu.Unlock()
	}
	o.done.Go(func() { pipe(requests{o: o, s: s}, c) })
	o.done.Go(func() { pipe(replies{o: o, c: c}, s) })
}

// replies passes the server's bytes to the client c, or drops them while
// the proxy loses replies (LoseReplies).
type replies struct {
	o *Outage
	c net.Conn
}

func (r replies) Write(p []byte) (int, error) {
	r.o.mu.Lock()
	lose := r.o.lose
	r.o.mu.Unlock()
	if lose {
		return len(p), nil
	}
	return r.c.Write(p)
}

// requests passes the client's bytes to the server s, and makes the proxy
// lose the server's replies from the first bytes that hold the marker of
// LoseRepliesAfter on.
type requests struct {
	o *Outage
	s net.Conn
}

func (r requests) Write(p []byte) (int, error) {
	r.o.mu.Lock()
	if r.o.marker != nil && bytes.Contains(bytes.ToLower(p), r.o.marker) {
		r.o.lose = true
		r.o.marker = nil
	}
	r.o.mu.Unlock()
	return r.s.Write(p)
}

// LoseRepliesAfter is LoseReplies from the moment a client sends a
// statement that holds marker (compared in lower case; say "commit"): the
// server receives and carries out that statement, and its answer is lost,
// as when the network fails just after a COMMIT reached the server.
func (o *Outage) LoseRepliesAfter(marker string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.marker = []byte(strings.ToLower(marker))
}

// LoseReplies makes the proxy drop what the server sends on every
// connection through it, open or new, until Restore: a client waits for
// the answer to a statement that the server received, carried out and
// answered, as when the network fails after a COMMIT reached the server.
// Cut then ends the wait with a broken connection.
func (o *Outage) LoseReplies() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.lose = true
}

// Cut closes every connection through the proxy and refuses new ones
// (connection refused) until Restore.
func (o *Outage) Cut() {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.ln != nil {
		o.ln.Close()
		o.ln = nil
	}
	for c := range o.conns {
		c.Close()
	}
}

// Restore accepts connections again, on the same address, after Cut, and
// passes the server's replies again (LoseReplies).
func (o *Outage) Restore() error {
	o.mu.Lock()
	cut := o.ln == nil
	o.lose = false
	o.marker = nil
	o.mu.Unlock()
	if !cut {
		return nil
	}
	ln, err := net.Listen("tcp", o.addr)
	if err != nil {
		return fmt.Errorf("testdb: listening again on %s after the outage: %w", o.addr, err)
	}
	o.serve(ln)
	return nil
}
