package queue

import "time"

// outage keeps a writer's results through a database outage (a restart, a
// failover, the network): a write that failed because the database could
// not be reached (connectionLost) counts no try while the worker runs; it
// is written again after a wait that doubles from completeRetryWait up to
// completeOutageWait, until the database is back or the worker stops (its
// shutdownBudget starts counting: from then on the writer counts its tries
// and gives up on what is left once the budget is spent, both read here,
// keeps and spent). The outage is logged once at its start (failed: first)
// and once at its end (ended), through a failureStreak that writers
// logging one outage together share (the executors). Given up after four
// tries within a second, every result of a job that finished during an
// outage was lost and the job ran again once its lease had passed. The
// completer, each failure an executor records and the run's giver keep
// one; one goroutine uses an outage (its streak may be shared).
type outage struct {
	streak *failureStreak
	// budget is the run's shutdown budget; nil: the worker never stops
	// (tests that assemble a run).
	budget *shutdownBudget
	// wait is the wait before the next write; 0: no write is kept.
	wait time.Duration
}

// newOutage returns the outage of a writer that logs through streak and
// stops keeping its writes when budget starts counting.
func newOutage(streak *failureStreak, budget *shutdownBudget) outage {
	return outage{streak: streak, budget: budget}
}

// keeps reports whether a write that failed with err is kept: the database
// could not be reached and the worker has not stopped.
func (o *outage) keeps(err error) bool { return connectionLost(err) && !o.budget.counting() }

// stopped is closed once the worker stops (its budget counts): a writer's
// wait for the next write through an outage ends then; nil (never) in runs
// that tests assemble.
func (o *outage) stopped() <-chan struct{} { return o.budget.stopped() }

// spent reports whether the shutdown's time is spent: no write would run,
// and what is not written is given up.
func (o *outage) spent() bool { return o.budget.spent() }

// failed records a kept write and returns whether it is the first failure
// of the outage (log it as a warning, the others at debug level) and how
// long to wait before the next write.
func (o *outage) failed() (first bool, wait time.Duration) {
	first = o.streak.failed()
	if o.wait == 0 {
		o.wait = completeRetryWait
	} else {
		o.wait = min(2*o.wait, completeOutageWait)
	}
	return first, o.wait
}

// ended records a write that reached the database (it worked, or failed
// otherwise) and reports whether it ended the outage (log that at info
// level), and how long the outage lasted.
func (o *outage) ended() (ended bool, lasted time.Duration) {
	o.wait = 0
	n, lasted := o.streak.succeeded()
	return n > 0, lasted
}
