package queue

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/testdb"
)

// TestMySQLWaiterTakesASlotFreedLater: a worker that starts while every
// wake slot of its table is held (more than 64 worker processes, or a
// rolling deployment whose new processes start before the old ones stop)
// polls, warning once, and takes a slot once one is free, with its
// backoff, and waits there. It gave up waiting for good at the first try,
// and polled for the rest of its life although the slots had been freed.
func TestMySQLWaiterTakesASlotFreedLater(t *testing.T) {
	ctx := context.Background()
	env := newTestEnv(t, engine.MySQL)
	// One session of the test holds every slot of the table.
	holder, err := env.db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	for slot := range wakeSlots {
		var taken int
		if err := holder.QueryRowContext(ctx, "SELECT GET_LOCK(CONCAT('jobqueue wake ', SHA1(CONCAT(DATABASE(), '.', ?)), ' ', ?), 0)", env.tbl.Name, slot).Scan(&taken); err != nil || taken != 1 {
			t.Fatalf("taking wake slot %d: %d, %v", slot, taken, err)
		}
	}
	logs := &testdb.LogRecorder{}
	q := env.queue(t, testdb.OpenURL(t, env.url), WithLogger(slog.New(logs)))
	w := q.NewWorker(WorkerConfig{Concurrency: 1, PollInterval: time.Minute, MaintenanceInterval: -1})
	w.HandleDefault(func(context.Context, *JobRow) error { return nil })
	stop, _ := startWorker(t, w)
	defer func() {
		if err := stop(10 * time.Second); err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	waitUntil(t, 10*time.Second, "the worker to find every slot held", func() bool {
		for _, l := range logs.Lines(slog.LevelDebug) {
			if strings.Contains(l, fmt.Sprintf("all %d wake slots", wakeSlots)) {
				return true
			}
		}
		return false
	})
	var released int
	if err := holder.QueryRowContext(ctx, "SELECT RELEASE_ALL_LOCKS()").Scan(&released); err != nil || released != wakeSlots {
		t.Fatalf("releasing the slots: %d, %v", released, err)
	}
	waitUntil(t, 15*time.Second, "the worker to take a freed slot and wait there", func() bool {
		return len(waitingSessionsOf(t, env)) == 1
	})
	if lines := logs.Lines(slog.LevelWarn); len(lines) != 1 || !strings.Contains(lines[0], "wake slots") {
		t.Errorf("warnings %q, want one about the wake slots", lines)
	}
}

// TestMySQLSlotHoldersReadWhileSessionsEnd: the holders of the wake slots
// are read without error while sessions take and free slots, and each
// holder read is a session that held a slot. The read filtered the free
// slots in SQL, which read each slot twice: a slot freed between the two
// reads gave a NULL session id and failed the read (an enqueue's wake-up
// of other processes then failed; once in CI, as a worker's session was
// killed).
func TestMySQLSlotHoldersReadWhileSessionsEnd(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	env := newTestEnv(t, engine.MySQL)
	holder, err := env.db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	var holderID int64
	if err := holder.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&holderID); err != nil {
		t.Fatal(err)
	}
	// The holder takes every slot and frees it again, over and over, until
	// the reads are done.
	done := make(chan struct{})
	churned := make(chan error, 1)
	go func() {
		churned <- func() error {
			for {
				for slot := range wakeSlots {
					select {
					case <-done:
						return nil
					default:
					}
					if _, err := holder.ExecContext(ctx, "DO GET_LOCK(CONCAT('jobqueue wake ', SHA1(CONCAT(DATABASE(), '.', ?)), ' ', ?), 0), RELEASE_ALL_LOCKS()", env.tbl.Name, slot); err != nil {
						return fmt.Errorf("taking and freeing slot %d: %w", slot, err)
					}
				}
			}
		}()
	}()
	defer func() {
		close(done)
		if err := <-churned; err != nil {
			t.Error(err)
		}
	}()
	for i := range 2000 {
		ids, err := readSlotHolders(ctx, env.db, env.tbl.Name)
		if err != nil {
			t.Fatalf("read %d of the holders: %v", i+1, err)
		}
		if len(ids) > 1 || (len(ids) == 1 && ids[0] != holderID) {
			t.Fatalf("read %d of the holders: %v, want none or only %d", i+1, ids, holderID)
		}
	}
}
