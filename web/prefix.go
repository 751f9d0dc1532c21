package web

import (
	"fmt"
	"net/http"
	"net/url"
	"path"
	"strings"
)

// ownPaths are the first segments of the dashboard's own paths, which a
// prefix must not start with.
var ownPaths = []string{"jobs", "api", "static"}

// PrefixError is the error of New and CheckPrefix for a prefix they
// refuse.
type PrefixError struct {
	Prefix string // the prefix given
	Reason string // why it is refused, and what to give instead
}

// Error says which prefix was refused and why.
func (e *PrefixError) Error() string {
	return fmt.Sprintf("web: bad prefix %q: %s", e.Prefix, e.Reason)
}

// CheckPrefix checks an Options.Prefix as New does and returns it as the
// dashboard uses it: without its trailing slash, and "" for "" or "/".
// It refuses a prefix that does not start with a slash, holds a query or
// fragment (? or #) or a control character, is not a clean path ("//",
// "." or ".." segments), or starts with one of the dashboard's own paths
// (/jobs, /api, /static), which would make requests ambiguous: the
// handler answers with and without its prefix, so with the prefix /jobs
// a request for /jobs/5 could be job 5's page or the page /5 under the
// prefix. The prefix is a path as in URL.Path, not escaped. The error
// is a *PrefixError.
func CheckPrefix(prefix string) (string, error) {
	if prefix == "" || prefix == "/" {
		return "", nil
	}
	bad := func(why string) (string, error) {
		return "", &PrefixError{Prefix: prefix, Reason: why}
	}
	if !strings.HasPrefix(prefix, "/") {
		return bad("give a path that starts with /, such as /queue")
	}
	if strings.ContainsAny(prefix, "?#") {
		return bad("give a path alone, without a query (?) or fragment (#), such as /queue")
	}
	for _, c := range prefix {
		if c < 0x20 || c == 0x7f {
			return bad("it holds a control character")
		}
	}
	p := strings.TrimSuffix(prefix, "/")
	if p == "/" || path.Clean(p) != p {
		return bad(`give a clean path, without "//", "." or ".." segments, such as /queue`)
	}
	first, _, _ := strings.Cut(p[1:], "/")
	for _, own := range ownPaths {
		if first == own {
			return bad(fmt.Sprintf("it is or starts with the dashboard's own path /%s, so a request for /%s/… could be the dashboard's page at the root or one under the prefix; choose another, such as /queue", own, own))
		}
	}
	return p, nil
}

// stripPrefix cuts prefix from the path of r, as http.StripPrefix does,
// when the path starts with it; a path without it (a proxy in front cut
// it already) is left as it is.
func stripPrefix(r *http.Request, prefix string) *http.Request {
	p, ok := cutPrefix(r.URL.Path, prefix)
	if !ok {
		return r
	}
	rp := ""
	if r.URL.RawPath != "" {
		rp, ok = cutPrefix(r.URL.RawPath, (&url.URL{Path: prefix}).EscapedPath())
		if !ok {
			return r
		}
	}
	r2 := new(http.Request)
	*r2 = *r
	r2.URL = new(url.URL)
	*r2.URL = *r.URL
	r2.URL.Path = p
	r2.URL.RawPath = rp
	return r2
}

// cutPrefix cuts prefix from p when p is prefix itself or goes on after
// it with a slash.
func cutPrefix(p, prefix string) (string, bool) {
	rest, ok := strings.CutPrefix(p, prefix)
	if !ok || rest != "" && rest[0] != '/' {
		return p, false
	}
	return rest, true
}
