package queue

import (
	"context"
	"time"
)

// The fence row of a role (fence.go): a second row of <table>_leader,
// named fenceRowName(role), that names the holder and term whose acts may
// land. Each act of the leader locks it (FenceLeaderAct) and reads the
// role's row without locking it; a takeover writes both rows, one
// statement after the other (acquireLeader), and so waits for the acts in
// flight; the leader's renewal writes only the role's row, and so never
// waits for its own acts.

// fenceRowName is the name of role's fence row in <table>_leader.
func fenceRowName(role string) string { return "fence:" + role }

// leaderTakeover is what an engine's store runs of acquireLeader, each
// statement on the pool, committing on its own.
type leaderTakeover interface {
	// acquireLeaderOn runs AcquireLeader: it reports whether holder
	// holds role now (taken or renewed).
	acquireLeaderOn(ctx context.Context, role, holder string, lease time.Duration) (bool, error)
	// leaderFenceBehind reports whether role's fence row does not name
	// holder and the role's term (or is missing), and that term.
	leaderFenceBehind(ctx context.Context, role, holder string) (term int64, behind bool, err error)
	// setLeaderFence makes role's fence row name holder and term,
	// creating it if missing; it waits for the acts that hold the row.
	setLeaderFence(ctx context.Context, role, holder string, term int64) error
}

// acquireLeader takes role for holder when its lease has passed, or renews
// it when holder holds it (store.leaderAcquire). When the role's term or
// holder changed (a takeover, or the lapse of holder's own lease), or the
// fence row is missing (a table led by an older version), it moves the
// fence row on too, which waits for the acts of the earlier term in flight
// and ends their term for the acts to come. A renewal in the same term
// finds the fence row up to date and writes nothing else: a leader's act
// that lasts longer than the lease (held up by a lock) does not keep its
// renewal waiting, and so does not cost it the leadership.
//
// Each statement commits on its own, never in one transaction: a process
// paused between two statements of a transaction (SIGSTOP, a VM's pause)
// would hold the role's row locked, and every other worker's takeover
// would wait for it until the process resumed (the server ends only an
// act's idle session, fence.go). On its own each step is safe: once the
// role's row names the new term, an old leader's act that begins finds it
// and changes nothing; one in flight holds the fence row, which the new
// term's acts need to name their term before they land, and which is
// moved on only after that act has ended. A fence row moved on late (a
// slow SetLeaderFence of an earlier term) refuses every act until the
// holder's next renewal moves it on again.
func acquireLeader(ctx context.Context, s leaderTakeover, role, holder string, lease time.Duration) (bool, error) {
	ok, err := s.acquireLeaderOn(ctx, role, holder, lease)
	if err != nil || !ok {
		return false, err
	}
	term, behind, err := s.leaderFenceBehind(ctx, role, holder)
	if err != nil {
		return false, err
	}
	if behind {
		if err := s.setLeaderFence(ctx, role, holder, term); err != nil {
			return false, err
		}
	}
	return true, nil
}
