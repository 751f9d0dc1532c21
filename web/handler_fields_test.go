package web_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/testdb"
	"github.com/jobqueue/jobqueue/queue"
	"github.com/jobqueue/jobqueue/web"
)

// TestPostFieldNamesExact: every POST route refuses a body field that is
// not exactly one of its names, a name differing only in case included,
// with a 400 that names the field and shows the expected shape, and
// changes nothing. encoding/json matched names without regard to case, so
// {"IDS":[…]} retried, cancelled or deleted the jobs, and {"Older_Than":…}
// pruned.
func TestPostFieldNamesExact(t *testing.T) {
	e := testdb.New(t, engine.SQLite)
	q := newQueue(t, e)
	ctx := context.Background()
	pending, err := q.Enqueue(ctx, sendEmail{To: "a@example.com"})
	if err != nil {
		t.Fatal(err)
	}
	failed, err := q.Enqueue(ctx, resizeImage{Path: "/a"})
	if err != nil {
		t.Fatal(err)
	}
	if err := q.Cancel(ctx, failed); err != nil {
		t.Fatal(err)
	}
	h := web.NewHandler(q, web.Options{Logger: testdb.QuietLogger()})
	const idsShape = `{"ids":[1,2,…]}`
	cases := []struct {
		name, target, body string
		field, shape       string // the field the error names, the shape it shows
	}{
		{"retry upper case", "/api/jobs/retry", fmt.Sprintf(`{"IDS":[%d]}`, failed), "IDS", idsShape},
		{"retry title case", "/api/jobs/retry", fmt.Sprintf(`{"Ids":[%d]}`, failed), "Ids", idsShape},
		{"cancel upper case", "/api/jobs/cancel", fmt.Sprintf(`{"IDS":[%d]}`, pending), "IDS", idsShape},
		{"cancel unknown field", "/api/jobs/cancel", fmt.Sprintf(`{"ids":[%d],"force":true}`, pending), "force", idsShape},
		{"delete upper case", "/api/jobs/delete", fmt.Sprintf(`{"IDS":[%d]}`, failed), "IDS", idsShape},
		{"delete both cases", "/api/jobs/delete", fmt.Sprintf(`{"ids":[%d],"IDs":[%d]}`, failed, pending), "IDs", idsShape},
		{"prune title case", "/api/maintenance/prune", `{"Older_Than":"0s"}`, "Older_Than", `{"older_than":"720h"}`},
		{"prune unknown field", "/api/maintenance/prune", `{"older_than":"0s","status":"failed"}`, "status", `{"older_than":"720h"}`},
		{"expire any field", "/api/maintenance/expire", `{"all":true}`, "all", "no body, or {}"},
		{"reclaim any field", "/api/maintenance/reclaim", `{"Force":1}`, "Force", "no body, or {}"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, body := call(t, h, "POST", c.target, c.body)
			if code != http.StatusBadRequest {
				t.Fatalf("POST %s %s = %d %s; want 400", c.target, c.body, code, body)
			}
			msg := decode[map[string]string](t, body)["error"]
			if !strings.Contains(msg, fmt.Sprintf("%q", c.field)) || !strings.Contains(msg, c.shape) {
				t.Fatalf("POST %s %s error %q; want it to name %q and show %s", c.target, c.body, msg, c.field, c.shape)
			}
			for id, want := range map[int64]queue.Status{pending: queue.StatusPending, failed: queue.StatusFailed} {
				j, err := q.Get(ctx, id)
				if err != nil {
					t.Fatal(err)
				}
				if j.Status != want {
					t.Fatalf("job %d is %s after the refused request; want %s, unchanged", id, j.Status, want)
				}
			}
		})
	}
	// The exact names still work.
	if code, body := call(t, h, "POST", "/api/jobs/retry", fmt.Sprintf(`{"ids":[%d]}`, failed)); code != http.StatusOK || !strings.Contains(body, `"ok":true`) {
		t.Fatalf("retry with exact names = %d %s; want 200 ok", code, body)
	}
}

// TestPostFieldGivenTwice: a body that gives a field twice is refused with
// a 400 naming the field, and nothing is done. encoding/json kept the last
// value, so {"older_than":"1000d","older_than":"0s"} pruned every finished
// job, and {"ids":[A],"ids":[B]} acted on B alone.
func TestPostFieldGivenTwice(t *testing.T) {
	e := testdb.New(t, engine.SQLite)
	q := newQueue(t, e)
	ctx := context.Background()
	failed, err := q.Enqueue(ctx, resizeImage{Path: "/a"})
	if err != nil {
		t.Fatal(err)
	}
	if err := q.Cancel(ctx, failed); err != nil {
		t.Fatal(err)
	}
	h := web.NewHandler(q, web.Options{Logger: testdb.QuietLogger()})
	cases := []struct{ target, body, field string }{
		{"/api/jobs/retry", fmt.Sprintf(`{"ids":[987654321],"ids":[%d]}`, failed), "ids"},
		{"/api/jobs/delete", fmt.Sprintf(`{"ids":[%d], "ids":[%d]}`, failed, failed), "ids"},
		{"/api/maintenance/prune", `{"older_than":"1000d","older_than":"0s"}`, "older_than"},
	}
	for _, c := range cases {
		code, body := call(t, h, "POST", c.target, c.body)
		if code != http.StatusBadRequest {
			t.Errorf("POST %s %s = %d %s; want 400", c.target, c.body, code, body)
			continue
		}
		if msg := decode[map[string]string](t, body)["error"]; !strings.Contains(msg, fmt.Sprintf("%q given twice", c.field)) {
			t.Errorf("POST %s %s error %q; want it to say %q is given twice", c.target, c.body, msg, c.field)
		}
	}
	j, err := q.Get(ctx, failed)
	if err != nil {
		t.Fatalf("the job is gone after the refused requests: %v", err)
	}
	if j.Status != queue.StatusFailed {
		t.Fatalf("the job is %s after the refused requests; want failed, unchanged", j.Status)
	}
}
