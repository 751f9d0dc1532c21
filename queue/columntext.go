package queue

import "github.com/jobqueue/jobqueue/internal/jobtext"

// textProblem is the one rule for the text a job is found by, as given to
// Enqueue and as given to a filter (jobtext.Problem, which the command line
// applies to its flags too): what is wrong with s, after the name of the
// thing, or "" when nothing is.
func textProblem(s string, max int) string { return jobtext.Problem(s, max) }

// noJobHas reports whether a filter value s, for a column of at most max
// characters, can match no job because no job can hold it (textProblem):
// the readers answer "nothing" for it without asking the database, which
// would refuse it on PostgreSQL. The empty filter ("no filter") is not such
// a value.
func noJobHas(s string, max int) bool {
	return s != "" && textProblem(s, max) != ""
}
