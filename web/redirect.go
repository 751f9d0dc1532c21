package web

import (
	"net/http"
	"strings"
)

// prefixedRedirects keeps the router's redirects (to a path with its
// trailing slash, to a clean path) under the prefix the handler is mounted
// at: the router writes them from the path it was given, which
// http.StripPrefix cut, so /admin/queue/api would send the browser to /api/.
type prefixedRedirects struct {
	http.ResponseWriter
	base string
}

// WriteHeader puts the prefix in front of a redirect's site-absolute
// Location before the header goes out.
func (w prefixedRedirects) WriteHeader(code int) {
	if code >= 300 && code < 400 {
		loc := w.Header().Get("Location")
		if strings.HasPrefix(loc, "/") && !strings.HasPrefix(loc, "//") {
			w.Header().Set("Location", w.base+loc)
		}
	}
	w.ResponseWriter.WriteHeader(code)
}

// Unwrap gives http.ResponseController the writer underneath.
func (w prefixedRedirects) Unwrap() http.ResponseWriter { return w.ResponseWriter }
