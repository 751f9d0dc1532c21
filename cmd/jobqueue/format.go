package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"unicode"

	"github.com/jobqueue/jobqueue/internal/jobjson"
	"github.com/jobqueue/jobqueue/queue"
)

// jobJSON is a job as `show --json` and `list --json` print it (the shape
// the dashboard's API gives too).
type jobJSON = jobjson.Job

// toJSON converts a row for printing.
func toJSON(j *queue.JobRow) jobJSON { return jobjson.From(j) }

// writeJSON prints v as one line of JSON.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// writeStats prints counts per status, as JSON (exactly one key per
// status, jobjson.Stats) or as text.
func writeStats(w io.Writer, stats map[queue.Status]int64, asJSON bool) error {
	if asJSON {
		return writeJSON(w, jobjson.Stats(stats))
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	var total int64
	for _, s := range queue.Statuses() {
		fmt.Fprintf(tw, "%s\t%d\t\n", s, stats[s])
		total += stats[s]
	}
	fmt.Fprintf(tw, "total\t%d\t\n", total)
	return tw.Flush()
}

// writeJobTable prints rows as a table for people, a line per job: a text
// with a control character is quoted (tableCell).
func writeJobTable(w io.Writer, rows []*queue.JobRow) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tNAME\tTYPE\tSTATUS\tATTEMPTS\tSCHEDULED (UTC)\tERROR")
	for _, j := range rows {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%d/%d\t%s\t%s\n", j.ID, tableCell(j.Name), tableCell(j.Type), tableCell(string(j.Status)),
			j.Attempts, j.MaxAttempts, j.ScheduledAt.UTC().Format("2006-01-02 15:04:05"), shorten(tableCell(j.Error), 60))
	}
	return tw.Flush()
}

// writeJobDetail prints one job, one field a line: a text with a control
// character (a newline, an escape sequence, …) is quoted as in the list
// (tableCell), and the payload is compacted (payloadCell), so that no
// field spills onto another line or reaches the terminal as a command. A
// time that is NULL is "-"; no error is an empty field, as in the list.
func writeJobDetail(w io.Writer, j *queue.JobRow) error {
	v := toJSON(j)
	orNone := func(s *string) string {
		if s == nil {
			return "-"
		}
		return *s
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "id\t%d\n", v.ID)
	fmt.Fprintf(tw, "name\t%s\n", tableCell(v.Name))
	fmt.Fprintf(tw, "type\t%s\n", tableCell(v.Type))
	fmt.Fprintf(tw, "status\t%s\n", tableCell(v.Status))
	fmt.Fprintf(tw, "attempts\t%d of %d (base delay %ds, max delay %ds)\n", v.Attempts, v.MaxAttempts, v.BaseDelay, v.MaxDelay)
	fmt.Fprintf(tw, "scheduled_at\t%s\n", v.ScheduledAt)
	fmt.Fprintf(tw, "expires_at\t%s\n", orNone(v.ExpiresAt))
	fmt.Fprintf(tw, "lease_until\t%s\n", orNone(v.LeaseUntil))
	fmt.Fprintf(tw, "finished_at\t%s\n", orNone(v.FinishedAt))
	fmt.Fprintf(tw, "created_at\t%s\n", v.CreatedAt)
	// No error is an empty field, as in the list: "-" would read as an
	// error whose text is "-".
	errText := ""
	if v.Error != nil {
		errText = tableCell(*v.Error)
	}
	fmt.Fprintf(tw, "error\t%s\n", errText)
	fmt.Fprintf(tw, "payload\t%s\n", payloadCell(v.Payload))
	return tw.Flush()
}

// payloadCell is a JSON payload as one cell of text: without its
// insignificant spaces (a pretty-printed payload is one line), then quoted
// if need be as any text is (tableCell).
func payloadCell(p json.RawMessage) string {
	var b bytes.Buffer
	if err := json.Compact(&b, p); err != nil {
		return tableCell(string(p)) // not JSON: its text as it is
	}
	return tableCell(b.String())
}

// tableCell is s as a cell of a text table: as it is, unless it holds a
// character that is not printable (a newline or a tab, which would break
// the table's lines or columns, an escape sequence, …) or starts with a
// double quote; it is then quoted as Go quotes it ("two\nlines"), so that
// an escape is told apart from a text that holds a backslash.
func tableCell(s string) string {
	if strings.HasPrefix(s, `"`) || strings.IndexFunc(s, func(r rune) bool { return !unicode.IsPrint(r) }) >= 0 {
		return strconv.Quote(s)
	}
	return s
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

// statusList is every status, in the order of a job's life
// (queue.Statuses), joined by sep, the last two by last:
// statusList(", ", " or ") is "pending, in_progress, … failed or expired".
func statusList(sep, last string) string {
	statuses := queue.Statuses()
	names := make([]string, len(statuses))
	for i, s := range statuses {
		names[i] = string(s)
	}
	if len(names) < 2 {
		return strings.Join(names, sep)
	}
	return strings.Join(names[:len(names)-1], sep) + last + names[len(names)-1]
}

// jobCount is n jobs in words: "1 job", "3 jobs".
func jobCount[N int | int64](n N) string {
	if n == 1 {
		return "1 job"
	}
	return fmt.Sprintf("%d jobs", n)
}
