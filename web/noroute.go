package web

import (
	"fmt"
	"net/http"
	"strings"
)

// noRoute answers a request that no route takes: 405 with an Allow header
// when the path is a route's with another method (the catch-all patterns
// / and /api/ match every method, so the router's own 405 never comes),
// else 404: a JSON error under /api, the dashboard's page elsewhere.
func (h *handler) noRoute(w http.ResponseWriter, r *http.Request) {
	if allow := h.allowed(r); allow != "" {
		h.methodNotAllowed(w, r, allow)
		return
	}
	if isAPI(r) {
		writeError(w, http.StatusNotFound, fmt.Sprintf("no API route %s %s; see the package documentation for the routes", r.Method, r.URL.Path))
		return
	}
	h.notFound(w, r)
}

// allowed lists the methods that a route takes at the path of r, "" for
// none. A page's GET route takes HEAD too.
func (h *handler) allowed(r *http.Request) string {
	var allow []string
	for _, method := range []string{http.MethodGet, http.MethodPost} {
		other := r.Clone(r.Context())
		other.Method = method
		_, pattern := h.mux.Handler(other)
		if pattern == "/" || pattern == "/api/" || pattern == "" || method == http.MethodGet && isActionPath(r.URL.Path) {
			continue // GET /api/jobs/retry is not a job's route
		}
		allow = append(allow, method)
		if method == http.MethodGet && !isAPI(r) {
			allow = append(allow, http.MethodHead)
		}
	}
	return strings.Join(allow, ", ")
}

// notFound shows the dashboard's page for a path that is none of its
// pages, with the links of every page back to the overview and the jobs.
func (h *handler) notFound(w http.ResponseWriter, r *http.Request) {
	h.renderMessage(w, r, http.StatusNotFound, fmt.Sprintf("There is no page %s%s in the dashboard: go to the overview or the jobs.", h.base(r), r.URL.EscapedPath()))
}

// isActionPath reports whether p is one of the job action routes, which
// GET /api/jobs/{id} would otherwise take for a job id.
func isActionPath(p string) bool {
	switch p {
	case "/api/jobs/retry", "/api/jobs/cancel", "/api/jobs/delete":
		return true
	}
	return false
}

// methodNotAllowed answers 405 for a route that takes only the methods in
// allow: a JSON error under /api, the message page elsewhere.
func (h *handler) methodNotAllowed(w http.ResponseWriter, r *http.Request, allow string) {
	w.Header().Set("Allow", allow)
	msg := fmt.Sprintf("%s %s takes %s only", r.Method, r.URL.Path, allow)
	if !isAPI(r) {
		h.renderMessage(w, r, http.StatusMethodNotAllowed, msg)
		return
	}
	writeError(w, http.StatusMethodNotAllowed, msg)
}
