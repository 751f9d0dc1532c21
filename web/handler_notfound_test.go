package web_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/testdb"
	"github.com/jobqueue/jobqueue/web"
)

// TestMissingJobOneError: retry, cancel and delete of a job id that is not
// in the table give the same error in their result, the queue's
// ErrJobNotFound error, and so does GET /api/jobs/{id} (with 404). Retry
// said "no job N" while cancel and delete said "job not found: no job N in
// table "T"".
func TestMissingJobOneError(t *testing.T) {
	e := testdb.New(t, engine.SQLite)
	q := newQueue(t, e)
	_, want := q.Get(context.Background(), 987654321)
	if want == nil {
		t.Fatal("Get of a missing job succeeded")
	}
	wantText := want.Error()[len("jobqueue: "):]
	h := web.NewHandler(q, web.Options{Logger: testdb.QuietLogger()})
	for _, action := range []string{"retry", "cancel", "delete"} {
		t.Run(action, func(t *testing.T) {
			code, body := call(t, h, "POST", "/api/jobs/"+action, `{"ids":[987654321]}`)
			if code != http.StatusOK {
				t.Fatalf("%s = %d %s; want 200 with a result", action, code, body)
			}
			r := decode[results](t, body).Results
			if len(r) != 1 || r[0].OK || r[0].Error != wantText {
				t.Fatalf("%s results = %+v; want one not ok with error %q", action, r, wantText)
			}
		})
	}
	code, body := call(t, h, "GET", "/api/jobs/987654321", "")
	if msg := decode[map[string]string](t, body)["error"]; code != http.StatusNotFound || msg != wantText {
		t.Fatalf("GET /api/jobs/987654321 = %d %q; want 404 %q", code, msg, wantText)
	}
}
