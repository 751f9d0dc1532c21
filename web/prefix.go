package web

import (
	"net/http"
	"net/url"
	"path"
	"strings"
)

// cleanPrefix is Options.Prefix as a clean path with a leading slash and
// no trailing one ("" for none, or for "/").
func cleanPrefix(p string) string {
	if p == "" {
		return ""
	}
	p = path.Clean("/" + p)
	if p == "/" {
		return ""
	}
	return p
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
