package web

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/jobqueue/jobqueue/internal/duration"
	"github.com/jobqueue/jobqueue/internal/jobjson"
	"github.com/jobqueue/jobqueue/queue"
)

// maxActionIDs is how many ids one action request may name.
const maxActionIDs = 1000

// maxBody is the largest request body the API reads.
const maxBody = 1 << 20

// writeJSON answers with v as JSON.
func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(true)
	_ = enc.Encode(v)
}

// apiError is the body of every API error.
type apiError struct {
	Error string `json:"error"`
}

// writeError answers with {"error": msg}.
func writeError(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, apiError{Error: msg})
}

// serverError logs err and answers 500 with its text (the database's
// errors say what went wrong; they carry no user input to hide).
func (h *handler) serverError(w http.ResponseWriter, r *http.Request, err error) {
	h.log.Error("web: request failed", "method", r.Method, "path", r.URL.Path, "user", h.user(r), "err", err)
	if isAPI(r) {
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	h.renderMessage(w, r, http.StatusInternalServerError, "the dashboard could not read the queue: "+err.Error())
}

// badRequest answers 400 for the user input error err.
func badRequest(w http.ResponseWriter, err error) {
	writeError(w, http.StatusBadRequest, err.Error())
}

// health is the answer of GET /api/health: "ok" or "unavailable", and
// nothing else, since anyone may ask (see Options.Authorize).
type health struct {
	Status string `json:"status"`
}

// apiHealth answers GET /api/health: 200 when the queue's table can be
// read, else 503; the error goes to the log only.
func (h *handler) apiHealth(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
	defer cancel()
	if _, _, err := h.q.Types(ctx, 1); err != nil {
		h.log.Error("web: health check failed", "table", h.q.Table(), "remote", r.RemoteAddr, "err", err)
		writeJSON(w, http.StatusServiceUnavailable, health{Status: "unavailable"})
		return
	}
	writeJSON(w, http.StatusOK, health{Status: "ok"})
}

// apiStats answers GET /api/stats[?type=] with the exact five counts.
func (h *handler) apiStats(w http.ResponseWriter, r *http.Request) {
	v, err := queryValues(r, statsParams...)
	if err != nil {
		badRequest(w, err)
		return
	}
	typ, err := typeParam(v)
	if err != nil {
		badRequest(w, err)
		return
	}
	stats, err := h.q.Stats(r.Context(), typ)
	if err != nil {
		h.serverError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, jobjson.Stats(stats))
}

// apiOverview answers GET /api/overview with what the overview page shows.
func (h *handler) apiOverview(w http.ResponseWriter, r *http.Request) {
	ov, err := h.overview(r.Context())
	if err != nil {
		h.serverError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, ov.json(h.opts.HidePayloads))
}

// jobsPage is the answer of GET /api/jobs.
type jobsPage struct {
	Jobs        []jobjson.Job `json:"jobs"`
	NextAfterID *int64        `json:"next_after_id"`
}

// apiJobs answers GET /api/jobs?status=&type=&name=&limit=&after_id=.
func (h *handler) apiJobs(w http.ResponseWriter, r *http.Request) {
	f, err := h.listFilter(r)
	if err != nil {
		badRequest(w, err)
		return
	}
	p, err := h.list(r.Context(), f)
	if err != nil {
		h.serverError(w, r, err)
		return
	}
	out := jobsPage{Jobs: make([]jobjson.Job, 0, len(p.Jobs)), NextAfterID: nextAfter(p)}
	for _, j := range p.Jobs {
		out.Jobs = append(out.Jobs, h.jobJSON(j))
	}
	writeJSON(w, http.StatusOK, out)
}

// list reads one page of jobs, bounded by Options.ListWindow.
func (h *handler) list(ctx context.Context, f jobsFilter) (queue.ListPage, error) {
	return h.q.ListPage(ctx, listFilter(f, f.Limit), h.opts.ListWindow)
}

// nextAfter is the after_id of the page after p, nil on the last page.
func nextAfter(p queue.ListPage) *int64 {
	if p.NextAfterID == 0 {
		return nil
	}
	return &p.NextAfterID
}

func (h *handler) jobJSON(j *queue.JobRow) jobjson.Job {
	out := jobjson.From(j)
	if h.opts.HidePayloads {
		out.Payload = json.RawMessage("null")
	}
	return out
}

// apiJob answers GET /api/jobs/{id}.
func (h *handler) apiJob(w http.ResponseWriter, r *http.Request) {
	if isActionPath(r.URL.Path) { // an action route, asked with GET
		h.methodNotAllowed(w, r, http.MethodPost)
		return
	}
	id, err := parseID(r.PathValue("id"))
	if err != nil {
		badRequest(w, err)
		return
	}
	job, err := h.q.Get(r.Context(), id)
	if errors.Is(err, queue.ErrJobNotFound) {
		writeError(w, http.StatusNotFound, resultText(err))
		return
	}
	if err != nil {
		h.serverError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, h.jobJSON(job))
}

// idsRequest is the body of the action routes.
type idsRequest struct {
	IDs []int64 `json:"ids"`
}

// idResult is the outcome of an action on one job.
type idResult struct {
	ID    int64  `json:"id"`
	OK    bool   `json:"ok"`
	Error string `json:"error,omitempty"`
}

// actionResponse is the answer of the action routes: one result per id,
// in the order given.
type actionResponse struct {
	Results []idResult `json:"results"`
}

// apiAction serves POST /api/jobs/{retry,cancel,delete} with {"ids":[…]}.
func (h *handler) apiAction(a Action) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var req idsRequest
		if err := decodeBody(w, r, &req, idsShape); err != nil {
			badRequest(w, err)
			return
		}
		if err := checkIDs(req.IDs); err != nil {
			badRequest(w, err)
			return
		}
		results, err := h.act(r.Context(), a, req.IDs)
		var done []int64
		for _, res := range results {
			if res.OK {
				done = append(done, res.ID)
			}
		}
		// Logged also when the database failed part-way: the jobs done
		// before it stay done.
		h.log.Info("web: jobs "+actionPast(a), "user", h.user(r), "action", a, "ids", req.IDs, "done", done, "remote", r.RemoteAddr)
		if err != nil {
			h.serverError(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, actionResponse{Results: results})
	}
}

// checkIDs refuses an empty list, too many ids and ids that are not
// positive.
func checkIDs(ids []int64) error {
	switch {
	case len(ids) == 0:
		return errors.New(`no ids given: send {"ids":[1,2,…]}`)
	case len(ids) > maxActionIDs:
		return fmt.Errorf("%d ids given; at most %d per request", len(ids), maxActionIDs)
	}
	for _, id := range ids {
		if id <= 0 {
			return fmt.Errorf("bad id %d: ids are positive integers", id)
		}
	}
	return nil
}

func actionPast(a Action) string {
	switch a {
	case ActionRetry:
		return "retried"
	case ActionCancel:
		return "cancelled"
	case ActionDelete:
		return "deleted"
	}
	return string(a)
}

// maintenanceResult is the answer of the maintenance routes.
type maintenanceResult struct {
	Count int64 `json:"count"`
}

// pruneRequest is the body of POST /api/maintenance/prune.
type pruneRequest struct {
	// OlderThan is a Go duration ("720h") or whole days ("30d"), as
	// `jobqueue prune --older-than` takes; finished jobs older than it go.
	OlderThan string `json:"older_than"`
}

// apiMaintenance serves POST /api/maintenance/{expire,reclaim,prune}.
func (h *handler) apiMaintenance(a Action) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var n int64
		var err error
		attrs := []any{"user", h.user(r), "action", a, "remote", r.RemoteAddr}
		switch a {
		case ActionExpire:
			if err := decodeOptionalBody(w, r); err != nil {
				badRequest(w, err)
				return
			}
			n, err = h.q.ExpireOverdue(r.Context())
		case ActionReclaim:
			if err := decodeOptionalBody(w, r); err != nil {
				badRequest(w, err)
				return
			}
			n, err = h.q.Reclaim(r.Context())
		case ActionPrune:
			var req pruneRequest
			if err := decodeBody(w, r, &req, pruneShape); err != nil {
				badRequest(w, err)
				return
			}
			// The CLI's rule (prune --older-than): "720h", "30d", "0s".
			d, perr := duration.Parse(req.OlderThan)
			if perr != nil {
				badRequest(w, fmt.Errorf(`bad older_than %q: %v; give an age such as "720h" or "30d"`, req.OlderThan, perr))
				return
			}
			attrs = append(attrs, "older_than", d)
			n, err = h.q.Prune(r.Context(), d)
		}
		attrs = append(attrs, "count", n)
		if err != nil {
			// Logged as the action too: the jobs it ended before the
			// error stay ended.
			h.log.Warn("web: maintenance failed", append(attrs, "err", err)...)
			h.serverError(w, r, err)
			return
		}
		h.log.Info("web: maintenance ran", attrs...)
		writeJSON(w, http.StatusOK, maintenanceResult{Count: n})
	}
}

// parseID reads a job id from a path or query value.
func parseID(s string) (int64, error) {
	id, err := strconv.ParseInt(s, 10, 64)
	if err != nil || id <= 0 {
		return 0, fmt.Errorf("bad job id %q: ids are positive integers", s)
	}
	return id, nil
}
