package web_test

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/jobqueue/jobqueue/internal/testdb"
	"github.com/jobqueue/jobqueue/queue"
	"github.com/jobqueue/jobqueue/web"
)

// windowTable enqueues one send_email job, then 6 cleanup jobs and one
// more send_email: with a window of 3 ids, a name filter's first page
// examines the 3 newest ids only. It returns the ids, oldest first.
func windowTable(t *testing.T, q *queue.Queue) []int64 {
	t.Helper()
	var ids []int64
	for _, a := range []queue.JobArgs{sendEmail{To: "old@example.com"}, cleanup{}, cleanup{}, cleanup{}, cleanup{}, cleanup{}, cleanup{}, sendEmail{To: "new@example.com"}} {
		id, err := q.Enqueue(context.Background(), a, queue.Type("email"))
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	return ids
}

// TestAPIJobsWindow: GET /api/jobs with a name and no type examines at
// most Options.ListWindow ids per page; a page may hold fewer jobs than the
// limit, even none, with next_after_id at the window's floor, and
// following next_after_id reaches every match, the last page's being null.
// Filters an index serves page as before.
func TestAPIJobsWindow(t *testing.T) {
	testdb.ForEachEngine(t, func(t *testing.T, e *testdb.Env) {
		q := newQueue(t, e)
		ids := windowTable(t, q)
		h := web.NewHandler(q, web.Options{Logger: testdb.QuietLogger(), ListWindow: 3})
		type page struct {
			Jobs []struct {
				ID int64 `json:"id"`
			} `json:"jobs"`
			NextAfterID *int64 `json:"next_after_id"`
		}
		for _, c := range []struct {
			name, query string
			pages       [][]int64 // each page's ids
			nexts       []int64   // each page's next_after_id (0: null)
		}{
			{"name", "name=send_email&limit=1", [][]int64{{ids[7]}, {}, {ids[0]}},
				[]int64{ids[5], ids[2], 0}},
			{"name with status", "name=send_email&status=pending&limit=5", [][]int64{{ids[7]}, {}, {ids[0]}},
				[]int64{ids[5], ids[2], 0}},
			{"name matching nothing", "name=nothing", [][]int64{{}, {}, {}}, []int64{ids[5], ids[2], 0}},
			{"name and type (an index)", "name=send_email&type=email", [][]int64{{ids[7], ids[0]}}, []int64{0}},
			{"no filter", "limit=4", [][]int64{{ids[7], ids[6], ids[5], ids[4]}, {ids[3], ids[2], ids[1], ids[0]}}, []int64{ids[4], 0}},
		} {
			t.Run(c.name, func(t *testing.T) {
				after := int64(0)
				for i := range c.pages {
					target := "/api/jobs?" + c.query
					if after != 0 {
						target += fmt.Sprintf("&after_id=%d", after)
					}
					code, body := call(t, h, "GET", target, "")
					if code != 200 {
						t.Fatalf("GET %s = %d %s", target, code, body)
					}
					p := decode[page](t, body)
					got := []int64{}
					for _, j := range p.Jobs {
						got = append(got, j.ID)
					}
					next := int64(0)
					if p.NextAfterID != nil {
						next = *p.NextAfterID
					}
					if !slices.Equal(got, c.pages[i]) || next != c.nexts[i] {
						t.Fatalf("GET %s = jobs %v, next_after_id %d; want %v, %d (0: null)", target, got, next, c.pages[i], c.nexts[i])
					}
					if !strings.Contains(body, `"jobs":[`) {
						t.Fatalf("GET %s: jobs is not a list: %s", target, body)
					}
					after = next
				}
				if after != 0 {
					t.Fatalf("paging did not end after %d pages", len(c.pages))
				}
			})
		}
	})
}

// TestJobsPageWindow: a jobs page its window ended shows its jobs, says
// which ids were searched, and links to the older ones; following the
// links reaches the match, and the last page has no older link and says no
// jobs match only when none was found at all.
func TestJobsPageWindow(t *testing.T) {
	testdb.ForEachEngine(t, func(t *testing.T, e *testdb.Env) {
		q := newQueue(t, e)
		ids := windowTable(t, q)
		h := web.NewHandler(q, web.Options{Logger: testdb.QuietLogger(), ListWindow: 3})
		older := regexp.MustCompile(`id="older" href="([^"]+)"`)
		for _, c := range []struct {
			target string
			rows   []int64
			says   string // the searched line, "" for none
			next   int64  // the older link's after_id, 0 for none
			empty  bool   // whether it says "No jobs match."
		}{
			{"/jobs?name=send_email", []int64{ids[7]},
				fmt.Sprintf("Ids %d to %d were searched: no more of them match.", ids[5], ids[7]), ids[5], false},
			{fmt.Sprintf("/jobs?name=send_email&after_id=%d", ids[5]), nil,
				fmt.Sprintf("No job of ids %d to %d matches; older ids remain.", ids[2], ids[4]), ids[2], false},
			{fmt.Sprintf("/jobs?name=send_email&after_id=%d", ids[2]), []int64{ids[0]}, "", 0, false},
			{fmt.Sprintf("/jobs?name=nothing&after_id=%d", ids[2]), nil, "", 0, true},
			{"/jobs?name=send_email&type=email", []int64{ids[7], ids[0]}, "", 0, false},
		} {
			t.Run(c.target, func(t *testing.T) {
				code, body := call(t, h, "GET", c.target, "")
				if code != 200 {
					t.Fatalf("GET %s = %d", c.target, code)
				}
				var rows []int64
				for _, m := range regexp.MustCompile(`<tr data-id="(\d+)"`).FindAllStringSubmatch(body, -1) {
					var id int64
					fmt.Sscan(m[1], &id)
					rows = append(rows, id)
				}
				if !slices.Equal(rows, c.rows) {
					t.Errorf("rows %v; want %v", rows, c.rows)
				}
				if c.says != "" && !strings.Contains(body, c.says) {
					t.Errorf("the page does not say %q:\n%s", c.says, body)
				}
				if c.says == "" && strings.Contains(body, "searched") {
					t.Errorf("the page speaks of a search its window did not end:\n%s", body)
				}
				if got := strings.Contains(body, "No jobs match."); got != c.empty {
					t.Errorf("says \"No jobs match.\": %v; want %v", got, c.empty)
				}
				m := older.FindStringSubmatch(body)
				switch {
				case c.next == 0 && m != nil:
					t.Errorf("an older link %s on the last page", m[1])
				case c.next != 0 && (m == nil || !strings.Contains(m[1], fmt.Sprintf("after_id=%d", c.next)) || !strings.Contains(m[1], "name=send_email")):
					t.Errorf("older link %v; want one to after_id=%d with the name", m, c.next)
				}
			})
		}
	})
}
