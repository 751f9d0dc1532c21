package queue

// prepareJob turns one job's args into the row to write: the kind and the
// payload its codec encodes, checked against what every engine stores.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"time"
	"unicode/utf8"

	"github.com/jobqueue/jobqueue/internal/jobtext"
)

// MaxPayloadSize is the largest payload, in bytes, that every engine
// stores with its default settings: MariaDB's default max_allowed_packet
// (16 MiB, the whole INSERT statement) is the smallest of the limits, the
// others being MySQL 8.0's 64 MiB, PostgreSQL's JSONB of 255 MiB and
// SQLite's strings of 1 GB; a MiB of the packet is left for the rest of
// the statement. Enqueue does not check it, since a server set up for
// more takes more; the command line reads a payload from stdin or a file
// only up to it and refuses a larger one.
const MaxPayloadSize = 15 << 20

// prepareJob validates args and turns them into a job to write.
func (q *Queue) prepareJob(args JobArgs, typ string, at time.Time, expires *time.Time, p RetryPolicy) (*newJob, error) {
	if args == nil {
		return nil, fmt.Errorf("%w: the args are nil", ErrInvalidJob)
	}
	if v := reflect.ValueOf(args); v.Kind() == reflect.Pointer && v.IsNil() {
		return nil, fmt.Errorf("%w: the args are a nil %T; pass a value", ErrInvalidJob, args)
	}
	kind := args.Kind()
	if kind == "" {
		return nil, fmt.Errorf("%w: Kind() of %T is empty; it names the job and must not be", ErrInvalidJob, args)
	}
	if p := textProblem(kind, maxKindLen); p != "" {
		return nil, fmt.Errorf("%w: Kind() of %T: the kind %s", ErrInvalidJob, args, p)
	}
	var payload []byte
	switch raw := args.(type) {
	case RawArgs:
		payload = raw.Payload
	case *RawArgs:
		payload = raw.Payload
	default:
		var err error
		if payload, err = q.codec.Marshal(args); err != nil {
			return nil, fmt.Errorf("%w: encoding %s args: %v", ErrPayloadRejected, kind, err)
		}
	}
	if len(bytes.TrimSpace(payload)) == 0 {
		payload = []byte("{}")
	}
	if !utf8.Valid(payload) {
		return nil, fmt.Errorf("%w: the %s payload is not valid UTF-8", ErrPayloadRejected, kind)
	}
	if !json.Valid(payload) {
		return nil, fmt.Errorf("%w: the codec made no valid JSON for %s args; every engine stores the payload as JSON", ErrPayloadRejected, kind)
	}
	if prob := jobtext.PayloadProblem(q.kind, payload); prob != "" {
		return nil, fmt.Errorf("%w: the %s payload %s; remove NUL characters from the args", ErrPayloadRejected, kind, prob)
	}
	ma, bd, md := p.internal().Seconds()
	return &newJob{
		name: kind, typ: typ, payload: payload,
		maxAttempts: ma, baseDelay: bd, maxDelay: md,
		scheduledAt: at, expiresAt: expires,
	}, nil
}
