package migrations

// UninstallReport is what Uninstall or UninstallEmpty dropped, filled in
// through WithReport when the call succeeds.
type UninstallReport struct {
	// Table is the table's name (folded to lower case on PostgreSQL).
	Table string
	// Missing: there was no table of the name; only what it had left
	// (side tables) was dropped, and Counts is empty.
	Missing bool
	// Counts are the jobs deleted with the table per status, as
	// JobsHeldError's (statuses without jobs left out; none for
	// UninstallEmpty). They are counted under the lock the drops run
	// under, the one UninstallEmpty describes, so a job enqueued while
	// the uninstall ran is counted, never deleted unseen.
	Counts []StatusCount
}

// Total is the number of jobs deleted with the table.
func (r *UninstallReport) Total() int64 { return totalJobs(r.Counts) }

// Summary is the counts joined, say "2 pending, 1 failed" ("" for none).
func (r *UninstallReport) Summary() string { return summary(r.Counts) }

// WithReport makes Uninstall and UninstallEmpty fill *r with what they
// dropped once they succeed (r is left alone when they fail). Uninstall
// given it locks the table against writes as UninstallEmpty does and
// counts its jobs under that lock, one more statement that reads the
// whole table, before the drops. Install, Check, Migrate and
// GooseMigrations ignore it.
func WithReport(r *UninstallReport) Option {
	return func(o *options) error {
		o.report = r
		return nil
	}
}
