package queue

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// streamMany writes the jobs of EnqueueMany with one COPY whose rows are
// checked and encoded while the COPY runs (copy_postgres.go): the server
// starts on the first rows while the client encodes the payloads of the
// next, instead of waiting until every payload is encoded. It serves the
// plain calls on PostgreSQL: in the queue's own transaction, without
// middleware, unique keys or jobs with options of their own. A bad job
// aborts the COPY, so nothing is written, and the error is the one the
// checks before writing give (prepareMany), whatever else failed. ok is
// false, with nothing written, when the call does not fit; the caller then
// checks every job and writes them.
func (q *Queue) streamMany(ctx context.Context, args []JobArgs, opts []EnqueueOption, now time.Time) (n int, ok bool, err error) {
	pg, isPg := q.st.(pgStore)
	if !isPg || q.pooled || q.enqueueMW != nil || pg.r.copyFormat.Load() == copyNone {
		return 0, false, nil
	}
	for _, a := range args {
		if _, own := a.(withOptions); own {
			return 0, false, nil
		}
	}
	typ, at, expires, p, key, err := q.resolve(opts, now)
	if err != nil || key != nil {
		return 0, err != nil, err
	}
	job := func(i int) (*newJob, error) {
		j, err := q.prepareJob(args[i], typ, at, expires, p)
		if err != nil {
			return nil, fmt.Errorf("job %d of %d: %w (no job was written)", i, len(args), err)
		}
		return j, nil
	}
	// Every job has the call's type, the notification's payload.
	inline := q.notifier != nil && q.notifier.inline()
	r := newPgCopyReaderOf(len(args), job, now)
	r.onStop = q.copyStopping
	err = pg.copyRows(ctx, q.db, r, inline, typ)
	switch {
	case errors.Is(err, errNoPgx) || errors.Is(err, errNoCopy):
		return 0, false, nil
	case r.err != nil:
		return 0, true, r.err
	case err != nil:
		// A bad job among those the COPY did not reach is the error to
		// report, as when every job is checked before writing.
		for i := r.next; i < len(args); i++ {
			if _, jerr := job(i); jerr != nil {
				return 0, true, jerr
			}
		}
		return 0, true, q.manyNotWritten(len(args), err)
	}
	if !inline {
		q.notifyEnqueued(typ) // wake workers everywhere
	}
	q.logger.Debug("jobs enqueued", "count", len(args))
	q.countEnqueued(ctx, len(args))
	return len(args), true, nil
}
