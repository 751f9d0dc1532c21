package queue

import (
	"context"
	"regexp"
	"testing"

	"github.com/jobqueue/jobqueue/db/pggen"
)

// pgLockBound is the lock bound of a PostgreSQL statement of attempts: the
// set_config of lock_timeout in its one-time filter.
var pgLockBound = regexp.MustCompile(`(?s)set_config\('lock_timeout',.*?, true\)`)

// TestPgLockBoundIsOneRule: the statements of attempts that wait for a
// locked row a bounded time (ExtendLeases, CompleteJobs,
// DeleteCompletedJobs) each spell the bound out, since sqlc shares no SQL
// between statements and a function of the schema would need a migration;
// this keeps the three copies one rule: the same expression, but for the
// number of its parameter.
func TestPgLockBoundIsOneRule(t *testing.T) {
	ctx := context.Background()
	statements := []struct {
		name   string
		record func(qs *pggen.Queries) error
	}{
		{"ExtendLeases", func(qs *pggen.Queries) error {
			_, err := qs.ExtendLeases(ctx, pggen.ExtendLeasesParams{})
			return err
		}},
		{"CompleteJobs", func(qs *pggen.Queries) error {
			_, err := qs.CompleteJobs(ctx, pggen.CompleteJobsParams{})
			return err
		}},
		{"DeleteCompletedJobs", func(qs *pggen.Queries) error {
			_, err := qs.DeleteCompletedJobs(ctx, pggen.DeleteCompletedJobsParams{})
			return err
		}},
	}
	param := regexp.MustCompile(`\$\d+`)
	var first, firstName string
	for _, s := range statements {
		var rec queryRecorder
		if err := recordingFailed(s.name, s.record(pggen.New(&rec))); err != nil {
			t.Fatal(err)
		}
		bounds := pgLockBound.FindAllString(rec.query, -1)
		if len(bounds) != 1 {
			t.Fatalf("%s sets lock_timeout %d times, want once: %s", s.name, len(bounds), rec.query)
		}
		bound := param.ReplaceAllString(bounds[0], "$$n")
		if first == "" {
			first, firstName = bound, s.name
			continue
		}
		if bound != first {
			t.Errorf("%s bounds its lock wait otherwise than %s:\n%s\nagainst\n%s", s.name, firstName, bound, first)
		}
	}
}
