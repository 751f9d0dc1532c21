package main

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/jobqueue/jobqueue/web"
)

// Environment variables that turn on the dashboard's basic auth.
const (
	envWebUser     = "JOBQUEUE_WEB_USER"
	envWebPassword = "JOBQUEUE_WEB_PASSWORD"
)

func (a *app) webCommand() *cobra.Command {
	var (
		addr               string
		readOnly, insecure bool
		hidePayloads       bool
		countLimit         int64
		prefix             string
	)
	cmd := &cobra.Command{
		Use:   "web [--addr ADDR] [--prefix PATH] [--read-only] [--hide-payloads] [--insecure] [--metrics-count-limit N]",
		Short: "Serve the dashboard (pages and JSON API) until stopped",
		Long: `web serves the dashboard of the table: an overview (jobs per status and type,
the oldest due job's age, recent failures), the jobs with filters, each job,
and actions (retry, cancel, delete, expire, reclaim, prune), with the JSON API
the pages use under /api.

Basic auth is on when ` + envWebUser + ` and ` + envWebPassword + ` are set, for
every path but the health check, GET /api/health, which load balancers' and
orchestrators' probes ask without credentials (it answers {"status":"ok"} or
503 {"status":"unavailable"}, nothing more). On an
address other than loopback the dashboard refuses to start without basic auth
or --read-only, since anyone who reaches it could delete jobs; --insecure
starts it anyway (when something in front of it authenticates). --read-only
hides the actions and refuses them. --hide-payloads leaves the jobs' payloads
out of the pages and the API (they may hold personal data or secrets).
--prefix /queue serves the dashboard under /queue/, also behind a proxy that
cuts /queue off the path before it passes a request on; a prefix that is not
a clean path, or that starts with the dashboard's own /jobs, /api or /static,
or is /metrics, is refused (exit 2).
SIGINT, SIGTERM or SIGHUP stops it, giving requests in flight 5 seconds; a
second such signal closes their connections at once, and a third ends the
process there and then (exit status 1).

/metrics, beside the dashboard on the same address (and behind the same
basic auth when it is on; with --prefix /queue at /queue/metrics too), serves the table's jobs per type and status and
oldest due pending job's age per type in the Prometheus text format
(jobqueue_jobs, jobqueue_oldest_pending_age_seconds), read at most once per 5s
whatever the scrape rate (--metrics-count-limit N stops each count at N, for a
table of millions of rows), and jobqueue_jobs_worked_total for the abandoned
attempts its reclaim action ended.`,
		Args: flagsOnly,
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			user, pass := os.Getenv(envWebUser), os.Getenv(envWebPassword)
			if (user == "") != (pass == "") {
				return usagef("set both %s and %s for basic auth, or neither", envWebUser, envWebPassword)
			}
			if strings.Contains(user, ":") {
				// Basic auth sends "user:password" and splits it at the
				// first colon: no one could log in.
				return usagef("%s must not contain a colon, which basic auth cannot carry in a user name; choose another name", envWebUser)
			}
			if err := checkCountLimit(countLimit); err != nil {
				return err
			}
			pathPrefix, err := webPrefix(prefix)
			if err != nil {
				return err
			}
			host, _, err := net.SplitHostPort(addr)
			if err != nil {
				return usagef("bad --addr %q: give HOST:PORT, such as 127.0.0.1:8080", addr)
			}
			// A port out of range or not a number, before the database is
			// opened: a usage error, as for work --metrics-addr.
			if err := checkAddr("--addr", addr); err != nil {
				return err
			}
			if !isLoopback(host) && user == "" && !readOnly && !insecure {
				return usagef("refusing to serve the dashboard's actions on %s without authentication: set %s and %s, or add --read-only, or --insecure if something in front of it authenticates", addr, envWebUser, envWebPassword)
			}
			ctx := cmd.Context()
			logger := a.logger(slog.LevelInfo)
			m, err := newPromMetrics(logger)
			if err != nil {
				return err
			}
			defer func() {
				sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				if err := m.close(sctx); err != nil {
					logger.Warn("metrics: " + err.Error())
				}
			}()
			// The queue reports to the telemetry, so that the attempts the
			// dashboard's reclaim ends are counted in
			// jobqueue_jobs_worked_total, as a worker's maintenance's are.
			q, closeQueue, err := a.openQueue(ctx, m.tel.QueueOptions()...)
			if err != nil {
				if ctx.Err() != nil {
					// SIGINT or SIGTERM while connecting: a stop
					// asked for, not a database out of reach.
					return nil
				}
				return err
			}
			defer closeQueue()
			err = func() error {
				if err := m.observe(q, countLimit); err != nil {
					return err
				}
				dashboard, err := web.New(q, web.Options{ReadOnly: readOnly, HidePayloads: hidePayloads, Logger: logger,
					Prefix: pathPrefix, User: checkedUser(user != "")})
				if err != nil {
					return err
				}
				h := withMetrics(dashboard, m.handler, pathPrefix)
				if user != "" {
					h = basicAuth(h, user, pass, pathPrefix, logger)
				}
				// /metrics and basic auth's 401 answer beside the
				// dashboard: the same security headers as its answers.
				h = web.SecurityHeaders(h)
				return serve(ctx, addr, pathPrefix, h, a, readOnly, user != "")
			}()
			if err != nil {
				return explainTableError(err, q.Table())
			}
			return nil
		}),
	}
	cmd.Flags().StringVar(&addr, "addr", "127.0.0.1:8080", "address to listen on (HOST:PORT)")
	cmd.Flags().StringVar(&prefix, "prefix", "", "path to serve the dashboard under, such as /queue")
	cmd.Flags().BoolVar(&readOnly, "read-only", false, "hide the actions and refuse them (403)")
	cmd.Flags().Int64Var(&countLimit, "metrics-count-limit", 0, countLimitFlag)
	cmd.Flags().BoolVar(&hidePayloads, "hide-payloads", false, "leave the jobs' payloads out of the pages and the API")
	cmd.Flags().BoolVar(&insecure, "insecure", false, "serve actions on a non-loopback address without basic auth")
	return cmd
}

// webPrefix checks --prefix as the dashboard does (web.CheckPrefix) and
// cleans it: "" or a path such as "/queue" (no trailing slash). It also
// refuses /metrics, which serves the metrics here.
func webPrefix(p string) (string, error) {
	clean, err := web.CheckPrefix(p)
	if perr := (*web.PrefixError)(nil); errors.As(err, &perr) {
		return "", usagef("bad --prefix %q: %s", p, perr.Reason)
	}
	if err != nil {
		return "", err
	}
	if clean == metricsPath {
		return "", usagef("bad --prefix %q: %s serves the metrics, so %s alone could not also lead to the dashboard; choose another, such as /queue", p, metricsPath, metricsPath)
	}
	return clean, nil
}

// withMetrics serves metrics at /metrics and, with a prefix, at
// prefix/metrics too (the dashboard answers with and without its prefix,
// for a proxy that cuts it off or passes it on); dashboard serves every
// other path. The paths are compared, not made router patterns, which a
// prefix with a space or a brace would break.
func withMetrics(dashboard, metrics http.Handler, prefix string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if p := r.URL.Path; p == metricsPath || prefix != "" && p == prefix+metricsPath {
			metrics.ServeHTTP(w, r)
			return
		}
		dashboard.ServeHTTP(w, r)
	})
}

// serve listens on addr and serves h until ctx ends, then shuts down,
// giving requests in flight 5 seconds, or none once a.hardStop closes (a
// second signal). prefix is the path the dashboard is at, for the line
// that says where.
func serve(ctx context.Context, addr, prefix string, h http.Handler, a *app, readOnly, auth bool) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w; pick another --addr", addr, err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	mode := ""
	if readOnly {
		mode += ", read-only"
	}
	if auth {
		mode += ", basic auth"
	}
	fmt.Fprintf(a.out, "dashboard of table %s on http://%s%s/%s\n", a.table, ln.Addr(), prefix, mode)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	shutdown := make(chan error, 1)
	go func() { shutdown <- srv.Shutdown(sctx) }()
	select {
	case err := <-shutdown:
		if err != nil {
			return fmt.Errorf("shut down the dashboard: %w", err)
		}
	case <-a.hardStop:
		// A second signal: no more waiting for the requests in flight.
		a.logger(slog.LevelInfo).Warn("second signal: closing the dashboard's connections at once")
		if err := srv.Close(); err != nil {
			return fmt.Errorf("close the dashboard: %w", err)
		}
	}
	if err := <-done; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// isLoopback tells whether host (of --addr) only accepts local
// connections: localhost or a loopback IP. An empty host listens on every
// interface.
func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// checkedUser names who made a request, for the dashboard's log: the
// basic auth user when basicAuth checked it (auth), else "anonymous",
// since a user name in a request that nothing checks could be anyone's.
func checkedUser(auth bool) func(r *http.Request) string {
	return func(r *http.Request) string {
		if u, _, ok := r.BasicAuth(); auth && ok {
			return u
		}
		return "anonymous"
	}
}

// healthPath is the dashboard's health check, which the probes of load
// balancers and orchestrators ask without credentials.
const healthPath = "/api/health"

// basicAuth asks for user and pass (compared in constant time) before h,
// except for a GET or HEAD of the dashboard's health check (at
// healthPath, and under prefix, the path the dashboard is served at),
// which answers only "ok" or "unavailable", as web.Options.Authorize
// leaves it to anyone.
func basicAuth(h http.Handler, user, pass, prefix string, logger *slog.Logger) http.Handler {
	wantU, wantP := sha256.Sum256([]byte(user)), sha256.Sum256([]byte(pass))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if p := r.URL.Path; (r.Method == http.MethodGet || r.Method == http.MethodHead) &&
			(p == healthPath || prefix != "" && p == prefix+healthPath) {
			h.ServeHTTP(w, r)
			return
		}
		u, p, ok := r.BasicAuth()
		gotU, gotP := sha256.Sum256([]byte(u)), sha256.Sum256([]byte(p))
		if !ok || subtle.ConstantTimeCompare(gotU[:], wantU[:])&subtle.ConstantTimeCompare(gotP[:], wantP[:]) != 1 {
			if ok {
				logger.Warn("web: wrong user or password", "user", u, "remote", r.RemoteAddr)
			}
			w.Header().Set("WWW-Authenticate", `Basic realm="jobqueue", charset="UTF-8"`)
			http.Error(w, "authentication required", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	})
}
