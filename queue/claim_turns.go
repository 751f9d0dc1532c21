package queue

// Busy claims take turns. Claims of several claimers of one table (worker
// processes, or workers of one process) start at the head of the due jobs,
// and one that starts while another runs steps over every row that one has
// locked (FOR UPDATE SKIP LOCKED tries each) and over the dead entries it
// leaves once committed; a busy claim holds hundreds of rows. So a claim of
// at least claimTurnMin jobs by a claim session whose last claim took all
// it asked for (a busy table) takes the table's turn: on PostgreSQL
// LockClaims, a transaction-scoped advisory lock sent with the claim
// (store_postgres_claim.go), on MySQL the claim mutex, a user lock held
// from before the claim's SELECT to after its COMMIT (store_mysql_claim.go).
// The large claims of a busy table then run one after another, while the
// jobs they claimed ahead keep the workers running.
//
// A claim after a short one (an idle table: a lone job's claim), a
// session's first claim, and one after a failed claim claim at once,
// without the turn's statements: on MySQL those are two round trips of an
// idle worker's enqueue-to-start (GET_LOCK and RELEASE_LOCK; bench --jobs
// 2000 --workers 8 --latency-jobs 300 on MariaDB, 4 alternating pairs: p50
// 2.43, 2.13, 2.24, 2.40 ms against 2.84, 2.47, 2.68, 2.56 ms with the
// mutex taken by every claim). So does a claim of fewer than claimTurnMin jobs: it steps over
// few rows, and many processes of long handlers, each claiming a slot or
// two at a time, would otherwise queue for the turn. The size that counts
// is the claim's own, not the last one's: a worker's second claim, its
// first claim ahead of its slots (hundreds of jobs after a first claim of
// its free slots), takes its turn.

// claimTurnMin is the fewest jobs a claim that takes its turn asks for.
const claimTurnMin = 100

// claimTurns tells a claim session whether its next claim takes the
// table's turn. min is claimTurnMin (tests lower it); full is whether the
// last claim took all it asked for (false before the first).
type claimTurns struct {
	min  int
	full bool
}

// newClaimTurns returns the turns of a new claim session.
func newClaimTurns() claimTurns { return claimTurns{min: claimTurnMin} }

// next reports whether the next claim, of up to max jobs, takes its turn.
func (t *claimTurns) next(max int) bool { return takesTurn(t.full, max, t.min) }

// record notes a claim that asked for max jobs and claimed claimed of them,
// or failed with err.
func (t *claimTurns) record(max, claimed int, err error) {
	t.full = err == nil && max > 0 && claimed == max
}

// takesTurn is the rule: a claim of up to max jobs takes its turn when the
// last claim took all it asked for (lastFull) and max is at least min.
func takesTurn(lastFull bool, max, min int) bool {
	return lastFull && max >= min
}
