package migrations

import "fmt"

// RunAgainError is the error Migrate and Uninstall return (as it is, not
// wrapped) when their next step, once the cause the error names is fixed,
// is to run the same call again with the same arguments: on PostgreSQL and
// SQLite the failure changed nothing (one transaction), and on MySQL, where
// each statement commits on its own, running it again completes what is
// left. The migration of GooseMigrations returns one too, whose Step is
// "goose up". Errors that running the same call again would not cure (a
// bad table name or policy, a table of the name that is not a jobqueue
// table) are not RunAgainErrors.
//
// Its text advises to run Step again. A program that offers the same call
// under another name, a command line say, tells its users what to type by
// setting Step on a copy:
//
//	var again *migrations.RunAgainError
//	if errors.As(err, &again) {
//		cli := *again
//		cli.Step = "'mytool migrate'"
//		err = &cli
//	}
type RunAgainError struct {
	// Step is what to run again, as the error's text names it: "Migrate"
	// or "Uninstall" (the Go call) in the errors of this package, "goose
	// up" in those of GooseMigrations' migration.
	Step string
	// Table is the jobs table's name.
	Table string
	// Err is the cause; errors.Is and errors.As see it through Unwrap.
	Err error
	// what is the work that failed ("migrate table jobs to version 2");
	// left says what the failure left ("nothing was changed (one
	// transaction)"); then follows the step in the advice (" with the
	// same policy to complete it").
	what, left, then string
}

// Error says what failed, why, what the failure left and to run Step
// again.
func (e *RunAgainError) Error() string {
	return fmt.Sprintf("%s: %v (%s; fix the cause and run %s again%s)", e.what, e.Err, e.left, e.Step, e.then)
}

// Unwrap returns Err.
func (e *RunAgainError) Unwrap() error { return e.Err }
