package web_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"

	_ "modernc.org/sqlite" // the SQLite driver; pgx's stdlib and go-sql-driver/mysql work the same way

	"github.com/jobqueue/jobqueue/migrations"
	"github.com/jobqueue/jobqueue/queue"
	"github.com/jobqueue/jobqueue/web"
)

// exampleQueue opens a queue on a new SQLite database in a temp dir; the
// returned func removes it.
func exampleQueue() (*queue.Queue, func()) {
	dir, err := os.MkdirTemp("", "jobqueue-web-example-")
	if err != nil {
		log.Fatal(err)
	}
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "app.db")+"?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)")
	if err != nil {
		log.Fatal(err)
	}
	if err := migrations.Install(context.Background(), db, "jobs"); err != nil {
		log.Fatal(err)
	}
	q, err := queue.New(db, queue.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		log.Fatal(err)
	}
	return q, func() { q.Close(); db.Close(); os.RemoveAll(dir) }
}

// ExampleNewHandler mounts the dashboard under /admin/jobs/ of a service,
// lets only admins act, and reads the counts through its JSON API.
func ExampleNewHandler() {
	q, done := exampleQueue()
	defer done()
	for _, to := range []string{"ada@example.com", "grace@example.com"} {
		if _, err := q.Enqueue(context.Background(), sendEmail{To: to}, queue.Type("email")); err != nil {
			log.Fatal(err)
		}
	}

	dashboard := web.NewHandler(q, web.Options{
		HidePayloads: true,
		Authorize: func(r *http.Request, a web.Action) error {
			if a != web.ActionView && r.Header.Get("X-Role") != "admin" {
				return errors.New("only admins change jobs")
			}
			return nil
		},
	})
	mux := http.NewServeMux()
	mux.Handle("/admin/jobs/", http.StripPrefix("/admin/jobs", dashboard))
	srv := httptest.NewServer(mux)
	defer srv.Close()

	resp, err := http.Get(srv.URL + "/admin/jobs/api/stats?type=email")
	if err != nil {
		log.Fatal(err)
	}
	var stats map[string]int
	if err := json.NewDecoder(resp.Body).Decode(&stats); err != nil {
		log.Fatal(err)
	}
	resp.Body.Close()
	fmt.Println("pending emails:", stats["pending"])

	resp, err = http.Post(srv.URL+"/admin/jobs/api/jobs/delete", "application/json", strings.NewReader(`{"ids":[1]}`))
	if err != nil {
		log.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(resp.StatusCode, strings.TrimSpace(string(body)))
	// Output:
	// pending emails: 2
	// 403 {"error":"not authorized: only admins change jobs"}
}
