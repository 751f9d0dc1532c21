// Package web is a dashboard for a jobqueue table: pages to see what is
// waiting, what failed and why, and to retry, cancel or delete jobs, and the
// JSON API the pages use.
//
// NewHandler returns an http.Handler with nothing to start or stop; mount it
// at the root of a server or under a prefix of any Go service:
//
//	mux.Handle("/jobs/", http.StripPrefix("/jobs", web.NewHandler(q, web.Options{})))
//
// or, without http.StripPrefix, with Options.Prefix (which also serves a
// proxy in front that cuts the prefix off):
//
//	mux.Handle("/queue/", web.NewHandler(q, web.Options{Prefix: "/queue"}))
//
// A prefix that is not a clean path, or that starts with one of the
// dashboard's own paths (/jobs, /api, /static), is refused: New returns
// an error, NewHandler panics (CheckPrefix checks one from
// configuration).
//
// Links follow the prefix the handler was mounted under. Pages are rendered
// on the server with html/template; a little JavaScript (live refresh,
// selections, actions) and CSS are embedded in the binary.
//
// Pages: / (overview), /jobs?status=&type=&name=&after_id= and /jobs/{id}.
// The JSON API, which the pages use too: GET /api/stats[?type=] (the five
// exact counts), GET /api/jobs?status=&type=&name=&limit=&after_id=
// ({"jobs":[…],"next_after_id":N|null}, rows as `jobqueue show --json`;
// null means no older job matches, and a page filtered by name without a
// type examines at most Options.ListWindow ids, so it may hold fewer jobs
// than the limit, even none, while next_after_id is not null),
// GET /api/jobs/{id} (404 when missing), POST /api/jobs/retry, cancel and
// delete with {"ids":[…]} (a result per id), POST
// /api/maintenance/expire, reclaim and prune ({"older_than":"720h"}, or
// "30d" as `jobqueue prune --older-than` takes),
// GET /api/overview and GET /api/health ({"status":"ok"}, or 503
// {"status":"unavailable"}; served without asking Options.Authorize, for
// the probes of load balancers and orchestrators). Bad input gets 400 with
// {"error":"…"}, a filter's parameter misspelt or given twice included,
// and a type or name no job can have (the rule enqueues and the CLI's
// filters go by: not UTF-8, a NUL, a trailing space, too long). A path
// that is no route gets 404: a JSON error under /api, a page with links
// back to the dashboard elsewhere; a route asked with another method gets
// 405 and an Allow header.
//
// Safety: Options.ReadOnly hides the action buttons and refuses every
// mutating route with 403; Options.Authorize lets the embedding application
// decide per request and action; POSTs from another origin are refused
// (http.CrossOriginProtection); every action is logged.
package web

import (
	"context"
	"log/slog"
	"net/http"
	"net/url"
	"path"
	"strings"

	"github.com/jobqueue/jobqueue/queue"
)

// Action names what a request wants to do, for Options.Authorize.
type Action string

// The actions of the dashboard.
const (
	// ActionView: any page or GET of the API.
	ActionView Action = "view"
	// ActionRetry, ActionCancel, ActionDelete: the job actions.
	ActionRetry  Action = "retry"
	ActionCancel Action = "cancel"
	ActionDelete Action = "delete"
	// ActionExpire, ActionReclaim, ActionPrune: the maintenance actions.
	ActionExpire  Action = "expire"
	ActionReclaim Action = "reclaim"
	ActionPrune   Action = "prune"
)

// Options configures the dashboard. The zero value is a working dashboard
// with every action allowed.
type Options struct {
	// ReadOnly hides the action buttons and answers every mutating route
	// (a POST to an action) with 403; another method gets 405 as on a
	// writable dashboard.
	ReadOnly bool
	// Authorize, when set, is asked about every request that one of the
	// dashboard's routes takes, after routing and before it is served; an
	// error refuses it with 403 and the error's text. The action is
	// ActionView for a page, an asset or a GET of the API (HEAD too), the
	// route's action for a POST to an action. A request that no route
	// takes is answered without asking: 404 for a path that is none of
	// the dashboard's, 405 (with Allow) for a route's path asked with
	// another method, and the router's redirect to a path's clean form.
	// This is deliberate: these answers reveal only which paths the
	// dashboard has, which this documentation lists anyway, and nothing
	// of the queue (a job's page or API route is a route, asked whether
	// the job exists or not; these pages, and the page of a refused
	// request, do not even name the table).
	//
	// Nor is Authorize asked about the health check, GET (or HEAD)
	// /api/health, so that the probes of load balancers and orchestrators
	// (Kubernetes), which carry no login, reach it: its answer is only
	// {"status":"ok"}, or 503 {"status":"unavailable"} when the table
	// cannot be read (not the table's name, not the database's error,
	// which goes to Logger).
	//
	// To hide even the paths, or the health check, from callers who are
	// not logged in, check them in front of the handler (as `jobqueue
	// web` does with basic auth, the health check excepted). r's
	// URL.Path is the dashboard's own path, the prefix cut
	// (/api/jobs/retry). Requests from another origin to an action are
	// refused before Authorize is asked.
	Authorize func(r *http.Request, action Action) error
	// HidePayloads leaves payloads out of pages and API answers (they may
	// hold personal data or secrets).
	HidePayloads bool
	// Logger hears every action (who, what, which ids) and every error
	// (default slog.Default()).
	Logger *slog.Logger
	// User names who made a request, for the log (default: the basic auth
	// user name, else "anonymous"). Set it when nothing in front of the
	// handler checks basic auth: the default then logs whatever name a
	// request claims.
	User func(r *http.Request) string
	// CountLimit is where the overview's counts per status and type stop
	// (default 1000): a count equal to it means "that many or more", shown
	// as "1,000+". Counting a million rows takes a while; counting up to a
	// limit does not. GET /api/stats counts exactly.
	CountLimit int64
	// PageSize is how many jobs a jobs page shows (default 50, at most
	// MaxPageSize).
	PageSize int
	// ListWindow is the most ids a jobs page (and GET /api/jobs) examines
	// when it filters by name without a type, which no index of the table
	// serves (queue.Queue.ListPage): 0 for queue.DefaultListWindow, below 0
	// for no bound (the page then reads as far back as its jobs are, the
	// whole table for a rare name). Such a page may hold fewer jobs than
	// the page size, even none, and then says which ids it searched and
	// links to the older ones.
	ListWindow int64
	// Title is the name shown in the header (default "jobqueue").
	Title string
	// Prefix is the path the dashboard is reached at, such as
	// "/admin/queue", for when the handler is mounted without
	// http.StripPrefix (it then cuts the prefix itself) or behind a proxy
	// that cut it already: either way every link and asset starts with it.
	// Left empty, the prefix is found from the request, which is what
	// mounting under http.StripPrefix needs. "/queue/" is taken as
	// "/queue", and "/" as none. New refuses (and NewHandler panics on) a
	// prefix that does not start with a slash, holds a query or fragment
	// (? or #) or a control character, is not a clean path ("//", "." or
	// ".." segments), or starts with one of the dashboard's own paths
	// (/jobs, /api, /static): the handler answers with and without the
	// prefix, so under /jobs a request for /jobs/5 could be job 5's page
	// or the page /5 under the prefix. See CheckPrefix.
	Prefix string
}

// MaxPageSize is the largest limit the jobs page and GET /api/jobs accept.
const MaxPageSize = 1000

// maxTypes is how many types the overview shows.
const maxTypes = 50

// handler serves the dashboard of one queue.
type handler struct {
	q    *queue.Queue
	opts Options
	log  *slog.Logger
	mux  *http.ServeMux
	tmpl *templates
	// actions is the action of each route's pattern.
	actions map[string]Action
	// cop refuses requests from another origin to the routes that change
	// something.
	cop *http.CrossOriginProtection
}

// NewHandler returns the dashboard of q as an http.Handler. It panics
// when opts are refused, as New would refuse them (a Prefix that is not
// a clean path or that overlaps the dashboard's own paths): that is a
// mistake in the program, as a bad pattern given to http.ServeMux is. Use
// New, or CheckPrefix first, for a prefix that comes from configuration.
func NewHandler(q *queue.Queue, opts Options) http.Handler {
	h, err := New(q, opts)
	if err != nil {
		panic(err)
	}
	return h
}

// New returns the dashboard of q as an http.Handler, or an error when
// opts are refused: a Prefix that CheckPrefix refuses.
func New(q *queue.Queue, opts Options) (http.Handler, error) {
	prefix, err := CheckPrefix(opts.Prefix)
	if err != nil {
		return nil, err
	}
	opts.Prefix = prefix
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.CountLimit <= 0 {
		opts.CountLimit = 1000
	}
	if opts.PageSize <= 0 {
		opts.PageSize = 50
	}
	switch {
	case opts.ListWindow == 0:
		opts.ListWindow = queue.DefaultListWindow
	case opts.ListWindow < 0:
		opts.ListWindow = 0
	}
	if opts.PageSize > MaxPageSize {
		opts.PageSize = MaxPageSize
	}
	if opts.Title == "" {
		opts.Title = "jobqueue"
	}
	h := &handler{q: q, opts: opts, log: opts.Logger, mux: http.NewServeMux(), tmpl: loadTemplates(),
		cop: http.NewCrossOriginProtection()}
	h.routes()
	return h, nil
}

func (h *handler) routes() {
	h.actions = map[string]Action{}
	handle := func(pattern string, a Action, hd http.Handler) {
		h.actions[pattern] = a
		h.mux.Handle(pattern, hd)
	}
	view := func(pattern string, f http.HandlerFunc) { handle(pattern, ActionView, f) }
	view("GET /{$}", h.pageOverview)
	view("GET /jobs", h.pageJobs)
	view("GET /jobs/{id}", h.pageJob)
	handle(staticPattern, ActionView, staticHandler(http.HandlerFunc(h.notFound)))

	view(healthPattern, h.apiHealth)
	view("GET /api/stats", h.apiStats)
	view("GET /api/overview", h.apiOverview)
	view("GET /api/jobs", h.apiJobs)
	view(jobPattern, h.apiJob)
	for _, a := range []Action{ActionRetry, ActionCancel, ActionDelete} {
		handle("POST /api/jobs/"+string(a), a, h.apiAction(a))
	}
	for _, a := range []Action{ActionExpire, ActionReclaim, ActionPrune} {
		handle("POST /api/maintenance/"+string(a), a, h.apiMaintenance(a))
	}
	// The catch-alls answer 404 or 405: no route of the dashboard, so
	// not in h.actions.
	h.mux.HandleFunc("/api/", h.noRoute)
	h.mux.HandleFunc("/", h.noRoute)
}

// Patterns that route looks at.
const (
	staticPattern = "GET /static/"
	jobPattern    = "GET /api/jobs/{id}"
	// healthPattern is the health check's route, served without asking
	// Authorize (see Options.Authorize).
	healthPattern = "GET /api/health"
)

// ServeHTTP routes the request first; a request that one of the
// dashboard's routes takes is then checked (origin, read-only,
// Authorize) before it is served, the health check excepted. Anything else (404, 405, the router's redirects) is
// answered without asking: it shows nothing of the queue and changes
// nothing.
func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	setSecurityHeaders(w.Header())
	if h.opts.Prefix != "" {
		r = stripPrefix(r, h.opts.Prefix)
	}
	if b := h.base(r); b != "" {
		w = prefixedRedirects{ResponseWriter: w, base: b}
	}
	action, pattern, ok := h.route(r)
	if ok && pattern == healthPattern {
		// For the probes of load balancers and orchestrators, which
		// carry no login: the answer says only "ok" or "unavailable".
		h.mux.ServeHTTP(w, r)
		return
	}
	if !ok {
		if h.opts.Authorize != nil {
			// Not asked: the page must not show the table's name.
			r = r.WithContext(context.WithValue(r.Context(), unchecked{}, true))
		}
		h.mux.ServeHTTP(w, r)
		return
	}
	if err := h.cop.Check(r); err != nil {
		h.log.Warn("web: cross-origin request refused", "user", h.user(r), "action", action, "method", r.Method, "path", r.URL.Path,
			"origin", r.Header.Get("Origin"), "remote", r.RemoteAddr)
		writeError(w, http.StatusForbidden, "cross-origin request refused: post from the dashboard's own pages")
		return
	}
	if h.opts.ReadOnly && action != ActionView {
		h.log.Warn("web: action refused, read-only", "user", h.user(r), "action", action, "path", r.URL.Path, "remote", r.RemoteAddr)
		writeError(w, http.StatusForbidden, "the dashboard is read-only: actions are disabled")
		return
	}
	if h.opts.Authorize != nil {
		if err := h.opts.Authorize(r, action); err != nil {
			h.log.Warn("web: request not authorized", "user", h.user(r), "action", action, "path", r.URL.Path, "reason", err, "remote", r.RemoteAddr)
			if isAPI(r) || action != ActionView {
				writeError(w, http.StatusForbidden, "not authorized: "+err.Error())
			} else {
				r = r.WithContext(context.WithValue(r.Context(), unchecked{}, true))
				h.renderMessage(w, r, http.StatusForbidden, "not authorized: "+err.Error())
			}
			return
		}
	}
	h.mux.ServeHTTP(w, r)
}

// securityHeaders go out with every answer of the dashboard, whatever
// its kind (page, JSON, asset, redirect, refusal): no content sniffing
// (a job's text in JSON is never taken for HTML), no framing, and the
// pages' resources from the dashboard only (no inline script or style).
var securityHeaders = [][2]string{
	{"X-Content-Type-Options", "nosniff"},
	{"X-Frame-Options", "DENY"},
	{"Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; frame-ancestors 'none'"},
}

// setSecurityHeaders puts securityHeaders in hd: the one place they are
// set, first thing in ServeHTTP and in SecurityHeaders.
func setSecurityHeaders(hd http.Header) {
	for _, kv := range securityHeaders {
		hd.Set(kv[0], kv[1])
	}
}

// SecurityHeaders wraps h so that each of its answers carries the
// security headers every answer of the dashboard carries (the same list:
// X-Content-Type-Options, X-Frame-Options, Content-Security-Policy), for
// what a server serves beside the dashboard on the same address, such as
// /metrics or its login's 401. Wrapping the dashboard itself is harmless:
// each header is set once.
func SecurityHeaders(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		setSecurityHeaders(w.Header())
		h.ServeHTTP(w, r)
	})
}

// unchecked marks, in its context, a request served without asking
// Authorize (it is set), or one it refused: its page names nothing of the
// queue, not even the table.
type unchecked struct{}

// route finds the dashboard's route that takes r, its action and its
// pattern; false when none does: the router then answers 404 or 405 (its catch-alls) or
// redirects to the clean path. GET of an action's path and of a file that
// is none of the assets, which the patterns GET /api/jobs/{id} and GET
// /static/ match, are no route either: they get 405 and 404.
func (h *handler) route(r *http.Request) (Action, string, bool) {
	_, pattern := h.mux.Handler(r)
	a, ok := h.actions[pattern]
	switch {
	case !ok, !isClean(r.URL.EscapedPath()):
		// For its redirect to the clean path, the router gives the
		// pattern of that path.
		return "", "", false
	case pattern == jobPattern && isActionPath(r.URL.Path):
		return "", "", false
	case pattern == staticPattern && !isAsset(r.URL.Path):
		return "", "", false
	}
	return a, pattern, true
}

// isClean reports whether the router takes p as it is, rather than
// redirecting to its clean form (no "//", "." or ".." segments; a
// trailing slash is kept).
func isClean(p string) bool {
	if p == "" || p[0] != '/' {
		return false
	}
	c := path.Clean(p)
	if strings.HasSuffix(p, "/") && c != "/" {
		c += "/"
	}
	return c == p
}

func isAPI(r *http.Request) bool { return strings.HasPrefix(r.URL.Path, "/api/") }

// user names who made the request, for the log.
func (h *handler) user(r *http.Request) string {
	if h.opts.User != nil {
		return h.opts.User(r)
	}
	if u, _, ok := r.BasicAuth(); ok && u != "" {
		return u
	}
	return "anonymous"
}

// base is the path prefix the dashboard is reached at, escaped for links:
// Options.Prefix when set, else the one found from the request.
func (h *handler) base(r *http.Request) string {
	if h.opts.Prefix != "" {
		return (&url.URL{Path: h.opts.Prefix}).EscapedPath()
	}
	return base(r)
}

// base is the path prefix the handler is mounted under (by
// http.StripPrefix), found by comparing the request's original URI with
// the path it was given; "" at the root.
func base(r *http.Request) string {
	uri := r.RequestURI
	if i := strings.IndexAny(uri, "?#"); i >= 0 {
		uri = uri[:i]
	}
	p := r.URL.EscapedPath()
	if p == "" || !strings.HasSuffix(uri, p) {
		return ""
	}
	return strings.TrimSuffix(uri, p)
}
