package web

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/jobqueue/jobqueue/internal/jobtext"
	"github.com/jobqueue/jobqueue/queue"
)

// pageData is what every page's template gets.
type pageData struct {
	Title    string
	Base     string
	Page     string // "overview", "jobs" or "job": the active tab
	ReadOnly bool
	Now      time.Time
	Table    string // "" on a page served without asking Authorize
	// Refresh is whether the page's live refresh may fetch its URL
	// again: not for a page that answered a POST (a 405 page), whose
	// URL's GET is another page.
	Refresh bool
	// One of these, by page.
	Overview *overview
	Jobs     *jobsView
	Job      *jobView
	Message  *message
}

// message is the message page: what happened (its title and heading,
// by status) and a sentence on it.
type message struct {
	Heading string
	Text    string
}

// headings name what happened, by status, for the message page.
var headings = map[int]string{
	http.StatusBadRequest:          "Bad request",
	http.StatusForbidden:           "Not authorized",
	http.StatusNotFound:            "Not found",
	http.StatusMethodNotAllowed:    "Method not allowed",
	http.StatusInternalServerError: "Server error",
}

// heading is the message page's title and heading for status code.
func heading(code int) string {
	if s, ok := headings[code]; ok {
		return s
	}
	return http.StatusText(code)
}

// jobsFilter is the filter of the jobs page and GET /api/jobs.
type jobsFilter struct {
	Status  queue.Status
	Type    string
	Name    string
	Limit   int
	AfterID int64
}

// jobsView is the jobs page.
type jobsView struct {
	Filter    jobsFilter
	Rows      []*queue.JobRow
	NextAfter *int64
	// SearchedFrom and SearchedTo, when SearchedFrom is above 0, are the
	// ids the page examined, its window having ended it while older ids
	// remain (queue.ListPage).
	SearchedFrom, SearchedTo int64
	// Query is the filter as URL values (without after_id), for links.
	Query    url.Values
	Statuses []queue.Status
	Error    string
}

// jobView is one job's page.
type jobView struct {
	Job          *queue.JobRow
	Payload      string
	HidePayload  bool
	Timeline     []timelineEntry
	CanRetry     bool
	CanCancel    bool
	CanDelete    bool
	StatusReason string
}

// timelineEntry is one moment of a job's life.
type timelineEntry struct {
	At     time.Time
	What   string
	Future bool
}

func (h *handler) page(r *http.Request, name string) *pageData {
	d := &pageData{
		Title: h.opts.Title, Base: h.base(r), Page: name, ReadOnly: h.opts.ReadOnly,
		Now: time.Now().UTC(), Table: h.q.Table(),
		Refresh: r.Method == http.MethodGet || r.Method == http.MethodHead,
	}
	if r.Context().Value(unchecked{}) != nil {
		d.Table = ""
	}
	return d
}

// render executes the page's template into a buffer first, so that an
// error never leaves half a page.
func (h *handler) render(w http.ResponseWriter, r *http.Request, code int, name string, data *pageData) {
	if err := h.write(w, code, name, data); err != nil {
		h.serverError(w, r, err)
	}
}

// write executes the page's template into a buffer and, when that
// worked, sends it with status code; else it sends nothing.
func (h *handler) write(w http.ResponseWriter, code int, name string, data *pageData) error {
	var buf bytes.Buffer
	if err := h.tmpl.execute(&buf, name, data); err != nil {
		return fmt.Errorf("render %s: %w", name, err)
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_, _ = w.Write(buf.Bytes())
	return nil
}

func (h *handler) pageOverview(w http.ResponseWriter, r *http.Request) {
	ov, err := h.overview(r.Context())
	if err != nil {
		h.serverError(w, r, err)
		return
	}
	d := h.page(r, "overview")
	d.Overview = ov
	h.render(w, r, http.StatusOK, "overview", d)
}

func (h *handler) pageJobs(w http.ResponseWriter, r *http.Request) {
	d := h.page(r, "jobs")
	v := &jobsView{Statuses: queue.Statuses()}
	d.Jobs = v
	f, err := h.listFilter(r)
	v.Filter = f
	v.Query = filterQuery(f, h.opts.PageSize)
	if err != nil {
		v.Error = err.Error()
		h.render(w, r, http.StatusBadRequest, "jobs", d)
		return
	}
	p, err := h.list(r.Context(), f)
	if err != nil {
		h.serverError(w, r, err)
		return
	}
	v.Rows, v.NextAfter, v.SearchedFrom, v.SearchedTo = p.Jobs, nextAfter(p), p.SearchedFrom, p.SearchedTo
	h.render(w, r, http.StatusOK, "jobs", d)
}

func (h *handler) pageJob(w http.ResponseWriter, r *http.Request) {
	d := h.page(r, "job")
	id, err := parseID(r.PathValue("id"))
	if err != nil {
		h.renderMessage(w, r, http.StatusBadRequest, err.Error())
		return
	}
	job, err := h.q.Get(r.Context(), id)
	if errors.Is(err, queue.ErrJobNotFound) {
		h.renderMessage(w, r, http.StatusNotFound, fmt.Sprintf("There is no job %d: it never existed, or it was deleted or pruned.", id))
		return
	}
	if err != nil {
		h.serverError(w, r, err)
		return
	}
	v := &jobView{
		Job:         job,
		HidePayload: h.opts.HidePayloads,
		Timeline:    timeline(job, d.Now),
		CanRetry:    job.Status == queue.StatusFailed || job.Status == queue.StatusExpired,
		CanCancel:   job.Status == queue.StatusPending || job.Status == queue.StatusInProgress,
		CanDelete:   job.Status != queue.StatusInProgress,
	}
	if !v.HidePayload {
		v.Payload = prettyJSON(job.Payload)
	}
	d.Job = v
	h.render(w, r, http.StatusOK, "job", d)
}

// renderMessage shows the message page: what happened for status code
// (its title and heading) and msg. Should the page itself fail, msg goes
// out as text (serverError uses this page: no loop).
func (h *handler) renderMessage(w http.ResponseWriter, r *http.Request, code int, msg string) {
	d := h.page(r, "message")
	d.Message = &message{Heading: heading(code), Text: msg}
	if err := h.write(w, code, "message", d); err != nil {
		h.log.Error("web: message page failed", "method", r.Method, "path", r.URL.Path, "err", err)
		http.Error(w, msg, code)
	}
}

// prettyJSON indents a payload; one that is not JSON is shown as it is.
func prettyJSON(b []byte) string {
	var out bytes.Buffer
	if err := json.Indent(&out, b, "", "  "); err != nil {
		return string(b)
	}
	return out.String()
}

// timeline lists the moments of a job's life that its row records, in
// time order.
func timeline(j *queue.JobRow, now time.Time) []timelineEntry {
	es := []timelineEntry{{At: j.CreatedAt, What: "enqueued"}}
	if !j.ScheduledAt.Equal(j.CreatedAt) || j.Status == queue.StatusPending {
		what := "due"
		if j.Attempts > 0 {
			what = fmt.Sprintf("attempt %d due", j.Attempts)
			if j.Status == queue.StatusPending {
				what = fmt.Sprintf("attempt %d due (retry)", j.Attempts+1)
			}
		}
		es = append(es, timelineEntry{At: j.ScheduledAt, What: what})
	}
	if j.LeaseUntil != nil {
		es = append(es, timelineEntry{At: *j.LeaseUntil, What: fmt.Sprintf("lease of attempt %d ends", j.Attempts)})
	}
	if j.ExpiresAt != nil {
		es = append(es, timelineEntry{At: *j.ExpiresAt, What: "deadline"})
	}
	if j.FinishedAt != nil {
		es = append(es, timelineEntry{At: *j.FinishedAt, What: string(j.Status)})
	}
	sort.SliceStable(es, func(a, b int) bool { return es[a].At.Before(es[b].At) })
	for i := range es {
		es[i].Future = es[i].At.After(now)
	}
	return es
}

// listFilter reads the jobs filter from the request's query: status, type,
// name, limit (1 to MaxPageSize, default Options.PageSize) and after_id
// (the last id of the previous page).
func (h *handler) listFilter(r *http.Request) (jobsFilter, error) {
	f := jobsFilter{Limit: h.opts.PageSize}
	v, err := queryValues(r, listParams...)
	if err != nil {
		return f, err
	}
	if s := v.Get("status"); s != "" {
		f.Status = queue.Status(s)
		if !validStatus(f.Status) {
			return f, fmt.Errorf("unknown status %q: use one of %s", s, statusNames())
		}
	}
	if f.Type, err = typeParam(v); err != nil {
		return f, err
	}
	if f.Name, err = textParam(v, "name", jobtext.MaxKind); err != nil {
		return f, err
	}
	if s := v.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > MaxPageSize {
			return f, fmt.Errorf("bad limit %q: give a number from 1 to %d", s, MaxPageSize)
		}
		f.Limit = n
	}
	if s := v.Get("after_id"); s != "" {
		id, err := strconv.ParseInt(s, 10, 64)
		if err != nil || id <= 0 {
			return f, fmt.Errorf("bad after_id %q: give the last id of the previous page (a positive integer)", s)
		}
		f.AfterID = id
	}
	return f, nil
}

// Parameters of the routes that filter.
var (
	listParams  = []string{"status", "type", "name", "limit", "after_id"}
	statsParams = []string{"type"}
)

// queryValues parses the request's query string and refuses one that does
// not parse: r.URL.Query drops the parameters it cannot read, so a filter
// with a bad escape would be ignored and every job shown. It also refuses
// a parameter that is not one of params, exactly (case included), and one
// given twice, which would be ignored or read once: ?statu=failed would
// show every job.
func queryValues(r *http.Request, params ...string) (url.Values, error) {
	v, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return nil, fmt.Errorf("malformed query string: %v; escape each value (%%XX) and separate parameters with &", err)
	}
	names := make([]string, 0, len(v))
	for k := range v {
		names = append(names, k)
	}
	sort.Strings(names) // the same error whatever the map's order
	for _, k := range names {
		if !slices.Contains(params, k) {
			return nil, fmt.Errorf("unknown parameter %q: this route takes %s", k, strings.Join(params, ", "))
		}
		if len(v[k]) > 1 {
			return nil, fmt.Errorf("parameter %q given twice: give each parameter once", k)
		}
	}
	return v, nil
}

// typeParam reads the type filter.
func typeParam(v url.Values) (string, error) {
	return textParam(v, "type", jobtext.MaxType)
}

// textParam reads the filter param (type or name: a job's type or kind,
// whose longest is max characters), "" for none, and refuses a text no
// job can have (jobtext.Problem, the rule enqueues go by and the CLI's
// --type and --name are checked with): the filter would find nothing, as
// if there were no such jobs.
func textParam(v url.Values, param string, max int) (string, error) {
	s := v.Get(param)
	if s == "" {
		return "", nil
	}
	if p := jobtext.Problem(s, max); p != "" {
		return "", fmt.Errorf("%s %s, so no job has it", param, p)
	}
	return s, nil
}

// filterQuery is f as URL values, without after_id, for links: the limit
// too when it is not pageSize, the default, so that the next page is as
// long as this one.
func filterQuery(f jobsFilter, pageSize int) url.Values {
	v := url.Values{}
	if f.Status != "" {
		v.Set("status", string(f.Status))
	}
	if f.Type != "" {
		v.Set("type", f.Type)
	}
	if f.Name != "" {
		v.Set("name", f.Name)
	}
	if f.Limit != pageSize {
		v.Set("limit", strconv.Itoa(f.Limit))
	}
	return v
}

func validStatus(s queue.Status) bool {
	for _, x := range queue.Statuses() {
		if s == x {
			return true
		}
	}
	return false
}

// statusNames is every status, in the order of a job's life, joined by
// ", " (for messages).
func statusNames() string {
	statuses := queue.Statuses()
	names := make([]string, len(statuses))
	for i, st := range statuses {
		names[i] = string(st)
	}
	return strings.Join(names, ", ")
}
