package queue

import (
	"context"
	"time"
)

// The fence row of a role (fence.go): a second row of <table>_leader,
// named fenceRowName(role), that names the holder and term whose acts may
// land. Each act of the leader locks it (FenceLeaderAct) and reads the
// role's row without locking it; a takeover writes both rows, in one
// transaction (acquireLeader), and so waits for the acts in flight; the
// leader's renewal writes only the role's row, and so never waits for its
// own acts.

// fenceRowName is the name of role's fence row in <table>_leader.
func fenceRowName(role string) string { return "fence:" + role }

// leaderTakeover is what an engine's store runs of acquireLeader, each on
// d, the takeover's transaction.
type leaderTakeover interface {
	// acquireLeaderOn runs AcquireLeader: it reports whether holder
	// holds role now (taken or renewed).
	acquireLeaderOn(ctx context.Context, d dbtx, role, holder string, lease time.Duration) (bool, error)
	// leaderFenceBehind reports whether role's fence row does not name
	// holder and the role's term (or is missing), and that term.
	leaderFenceBehind(ctx context.Context, d dbtx, role, holder string) (term int64, behind bool, err error)
	// setLeaderFence makes role's fence row name holder and term,
	// creating it if missing; it waits for the acts that hold the row.
	setLeaderFence(ctx context.Context, d dbtx, role, holder string, term int64) error
}

// acquireLeader takes role for holder when its lease has passed, or renews
// it when holder holds it (store.leaderAcquire), in one transaction: when
// the role's term or holder changed (a takeover, or the lapse of holder's
// own lease), it moves the fence row on too, which waits for the acts of
// the earlier term in flight and ends their term for the acts to come. A
// renewal in the same term finds the fence row up to date and writes
// nothing else: a leader's act that lasts longer than the lease (held up
// by a lock) does not keep its renewal waiting, and so does not cost it
// the leadership.
func acquireLeader(ctx context.Context, r *runner, s leaderTakeover, role, holder string, lease time.Duration) (bool, error) {
	tx, err := r.db.BeginTx(ctx, nil)
	if err != nil {
		return false, err
	}
	defer tx.Rollback()
	d := r.on(tx)
	ok, err := s.acquireLeaderOn(ctx, d, role, holder, lease)
	if err != nil || !ok {
		return false, err
	}
	term, behind, err := s.leaderFenceBehind(ctx, d, role, holder)
	if err != nil {
		return false, err
	}
	if behind {
		if err := s.setLeaderFence(ctx, d, role, holder, term); err != nil {
			return false, err
		}
	}
	return true, tx.Commit()
}
