package web_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/testdb"
	"github.com/jobqueue/jobqueue/web"
)

// TestEveryActionLogged: every action, done or refused (read-only,
// Authorize, another origin), is logged on one line that says who, which
// action and from where (the request's remote address). The refusals
// said neither where from nor, for another origin, which action.
func TestEveryActionLogged(t *testing.T) {
	e := testdb.New(t, engine.SQLite)
	q := newQueue(t, e)
	id, err := q.Enqueue(context.Background(), cleanup{})
	if err != nil {
		t.Fatal(err)
	}
	ids := fmt.Sprintf(`{"ids":[%d]}`, id)
	actions := []struct {
		action web.Action
		path   string
		body   string
	}{
		{web.ActionRetry, "/api/jobs/retry", ids},
		{web.ActionCancel, "/api/jobs/cancel", ids},
		{web.ActionDelete, "/api/jobs/delete", ids},
		{web.ActionExpire, "/api/maintenance/expire", ""},
		{web.ActionReclaim, "/api/maintenance/reclaim", ""},
		{web.ActionPrune, "/api/maintenance/prune", `{"older_than":"3650d"}`},
	}
	ways := []struct {
		name    string
		opts    web.Options
		headers []string
		code    int
		level   string
	}{
		{"done", web.Options{}, nil, http.StatusOK, "INFO"},
		{"read-only", web.Options{ReadOnly: true}, nil, http.StatusForbidden, "WARN"},
		{"not authorized", web.Options{Authorize: func(*http.Request, web.Action) error { return errors.New("no") }}, nil, http.StatusForbidden, "WARN"},
		{"another origin", web.Options{}, []string{"Sec-Fetch-Site", "cross-site"}, http.StatusForbidden, "WARN"},
	}
	for _, way := range ways {
		for _, a := range actions {
			logs := &logBuffer{}
			opts := way.opts
			opts.Logger = slog.New(slog.NewTextHandler(logs, nil))
			opts.User = func(*http.Request) string { return "carol" }
			code, body := call(t, web.NewHandler(q, opts), "POST", a.path, a.body, way.headers...)
			if code != way.code {
				t.Errorf("%s: POST %s = %d %s; want %d", way.name, a.path, code, body, way.code)
				continue
			}
			lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
			want := []string{"level=" + way.level, "user=carol", "action=" + string(a.action), "remote=192.0.2.1:1234"}
			ok := len(lines) == 1
			for _, w := range want {
				ok = ok && strings.Contains(lines[0], w)
			}
			if !ok {
				t.Errorf("%s: POST %s logged %q; want one line with %s", way.name, a.path, lines, strings.Join(want, " "))
			}
		}
	}
}
