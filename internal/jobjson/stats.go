package jobjson

import (
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/jobqueue/jobqueue/queue"
)

// Stats is a count of jobs per status as JSON, the shape of `jobqueue
// stats --json` and the dashboard's /api/stats: one key per status of
// queue.Statuses, in that order, and 0 for a status the map lacks.
type Stats map[queue.Status]int64

// MarshalJSON writes every status's count in the order of queue.Statuses,
// say {"pending":2,"in_progress":0,…}.
func (s Stats) MarshalJSON() ([]byte, error) {
	b := []byte{'{'}
	for i, st := range queue.Statuses() {
		if i > 0 {
			b = append(b, ',')
		}
		key, err := json.Marshal(string(st))
		if err != nil {
			return nil, fmt.Errorf("jobjson: status %q as a JSON key: %w", st, err)
		}
		b = append(b, key...)
		b = append(b, ':')
		b = strconv.AppendInt(b, s[st], 10)
	}
	return append(b, '}'), nil
}
