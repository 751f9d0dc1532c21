package web

import (
	"embed"
	"fmt"
	"html/template"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/jobqueue/jobqueue/queue"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// templates holds one parsed template set per page.
type templates struct {
	pages map[string]*template.Template
}

// loadTemplates parses the embedded templates; they are part of the
// binary, so a parse error is a bug and panics.
func loadTemplates() *templates {
	t := &templates{pages: map[string]*template.Template{}}
	layout := template.Must(template.New("layout.html").Funcs(funcs).ParseFS(templateFS, "templates/layout.html"))
	for _, p := range []string{"overview", "jobs", "job", "message"} {
		c := template.Must(layout.Clone())
		t.pages[p] = template.Must(c.ParseFS(templateFS, "templates/"+p+".html"))
	}
	return t
}

func (t *templates) execute(w io.Writer, page string, data *pageData) error {
	p, ok := t.pages[page]
	if !ok {
		return fmt.Errorf("no template %q", page)
	}
	return p.ExecuteTemplate(w, "layout.html", data)
}

// staticHandler serves the embedded CSS and JavaScript: the files only;
// notFound answers for anything else, their directory included (a file
// server would list it).
func staticHandler(notFound http.Handler) http.Handler {
	sub, err := fs.Sub(staticFS, "static")
	if err != nil {
		panic(err)
	}
	fsrv := http.StripPrefix("/static/", http.FileServerFS(sub))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !isAsset(r.URL.Path) {
			notFound.ServeHTTP(w, r)
			return
		}
		w.Header().Set("Cache-Control", "public, max-age=300")
		fsrv.ServeHTTP(w, r)
	})
}

// isAsset reports whether p is the path of one of the embedded files
// under /static/. A name fs.Stat refuses (the directory's "",
// "app.css/") or cannot find is no file of ours, nor is a directory.
func isAsset(p string) bool {
	name, ok := strings.CutPrefix(p, "/static/")
	if !ok {
		return false
	}
	if !fs.ValidPath(name) {
		return false
	}
	fi, err := fs.Stat(staticFS, "static/"+name)
	return err == nil && !fi.IsDir()
}

// funcs are the helpers the templates use.
var funcs = template.FuncMap{
	"count": formatCount,
	"total": func(ov *overview, s queue.Status) string {
		str := groupDigits(ov.Totals[s])
		if ov.Capped[s] {
			str += "+"
		}
		return str
	},
	"utc":      func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05") },
	"iso":      func(t time.Time) string { return t.UTC().Format(time.RFC3339) },
	"ago":      ago,
	"age":      func(now, t time.Time) string { return humanDuration(now.Sub(t)) },
	"short":    shorten,
	"label":    statusLabel,
	"statuses": func() []queue.Status { return queue.Statuses() },
	"get":      func(m map[queue.Status]int64, s queue.Status) int64 { return m[s] },
	"seconds":  func(d time.Duration) int64 { return int64(d / time.Second) },
	"deref":    func(t *time.Time) time.Time { return *t },
	"deref64":  func(n *int64) int64 { return *n },
	// jobsURL builds a link to the jobs page with the given filters.
	"jobsURL": func(base string, kv ...string) string {
		v := url.Values{}
		for i := 0; i+1 < len(kv); i += 2 {
			if kv[i+1] != "" {
				v.Set(kv[i], kv[i+1])
			}
		}
		if len(v) == 0 {
			return base + "/jobs"
		}
		return base + "/jobs?" + v.Encode()
	},
	// withAfter adds after_id to a filter.
	"withAfter": func(base string, q url.Values, after int64) string {
		v := url.Values{}
		for k, xs := range q {
			v[k] = xs
		}
		v.Set("after_id", fmt.Sprint(after))
		return base + "/jobs?" + v.Encode()
	},
	"query": func(base string, q url.Values) string {
		if len(q) == 0 {
			return base + "/jobs"
		}
		return base + "/jobs?" + q.Encode()
	},
}

// formatCount writes n with thousands separators, and "n+" when it reached
// the limit (the count stopped there).
func formatCount(n, limit int64) string {
	s := groupDigits(n)
	if limit > 0 && n >= limit {
		s += "+"
	}
	return s
}

func groupDigits(n int64) string {
	s := fmt.Sprint(n)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// ago says how long before now t was ("3m ago"), or how long after ("in
// 5s").
func ago(now, t time.Time) string {
	d := now.Sub(t)
	if d < 0 {
		return "in " + humanDuration(-d)
	}
	if d < time.Second {
		return "just now"
	}
	return humanDuration(d) + " ago"
}

// humanDuration is d in its two largest units: "45s", "3m 12s", "2h 5m",
// "4d 3h".
func humanDuration(d time.Duration) string {
	if d < 0 {
		d = -d
	}
	s := int64(d / time.Second)
	switch {
	case s < 60:
		return fmt.Sprintf("%ds", s)
	case s < 3600:
		return fmt.Sprintf("%dm %ds", s/60, s%60)
	case s < 86400:
		return fmt.Sprintf("%dh %dm", s/3600, s%3600/60)
	}
	return fmt.Sprintf("%dd %dh", s/86400, s%86400/3600)
}

// shorten cuts s to at most n runes on one line.
func shorten(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

// statusLabel is a status for people.
func statusLabel(s queue.Status) string {
	return strings.ReplaceAll(string(s), "_", " ")
}
