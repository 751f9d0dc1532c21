package queue

import (
	"errors"
	"fmt"
	"time"
)

// Whose clock decides a periodic tick: the leader's (q.now), which finds
// the ticks that are due, like every time the queue writes. The last tick
// recorded for each periodic job (enqueueTickOnce) refuses every tick at or
// before it, for whichever worker leads next; so a leader whose clock was
// far ahead (a bad clock, a step) recorded a tick in the future, and every
// later leader's ticks were taken as enqueued already (logged at Info)
// until real time caught up: an hour ahead, an hour without the periodic
// job. The database server's clock, the one the leadership is timed by,
// bounds the record: a tick more than maxTickAhead ahead of it is neither
// enqueued nor recorded (an error that says to fix the leader's clock),
// and a recorded tick more than maxTickAhead ahead of it (written by a
// leader of an older version, or before the server's clock stepped back)
// refuses no tick: it is logged as a warning and replaced. The server's
// clock is the one the act's fence statement read (leaderActAt), in the
// transaction that enqueues and records the tick.

// maxTickAhead is how far ahead of the database server's clock a leader's
// tick may be, and the last tick recorded, to be trusted: a skew that NTP
// leaves is far below it.
const maxTickAhead = time.Minute

// errTickAhead is the error of a tick that a leader's clock found due
// more than maxTickAhead ahead of the database server's clock.
var errTickAhead = errors.New("jobqueue: a periodic tick ahead of the database server's clock")

// tickAhead returns an error wrapping errTickAhead when the tick of the
// periodic job named name is more than maxTickAhead ahead of serverNow,
// the database server's clock.
func tickAhead(name string, tick, serverNow time.Time) error {
	if !tick.After(serverNow.Add(maxTickAhead)) {
		return nil
	}
	return fmt.Errorf("%w: periodic job %q: this worker's clock found tick %s due, %s ahead of the database server's clock (%s); nothing was enqueued or recorded; synchronise this machine's clock (NTP)",
		errTickAhead, name, tick.UTC().Format(time.RFC3339Nano), tick.Sub(serverNow).Round(time.Second), serverNow.UTC().Format(time.RFC3339))
}

// recordAhead reports whether last, the last tick recorded of a periodic
// job, is more than maxTickAhead ahead of serverNow: a leader whose clock
// was ahead recorded it, and it refuses no tick.
func recordAhead(last, serverNow time.Time) bool {
	return last.After(serverNow.Add(maxTickAhead))
}
