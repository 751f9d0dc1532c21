package jobjson

import (
	"bytes"
	"encoding/json"
	"slices"
	"testing"

	"github.com/jobqueue/jobqueue/queue"
)

// TestStatsJSON: Stats gives one key per status of queue.Statuses, in
// that order, with 0 for the statuses the map lacks and nothing for
// statuses of no jobqueue version.
func TestStatsJSON(t *testing.T) {
	cases := []struct {
		name string
		in   Stats
		want map[queue.Status]int64
	}{
		{"nil", nil, map[queue.Status]int64{}},
		{"some", Stats{queue.StatusPending: 2, queue.StatusExpired: 7}, map[queue.Status]int64{queue.StatusPending: 2, queue.StatusExpired: 7}},
		{"other status", Stats{"paused": 3, queue.StatusFailed: 1}, map[queue.Status]int64{queue.StatusFailed: 1}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b, err := json.Marshal(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			dec := json.NewDecoder(bytes.NewReader(b))
			if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
				t.Fatalf("%s: starts with %v, %v; want an object", b, tok, err)
			}
			var keys []queue.Status
			for dec.More() {
				tok, err := dec.Token()
				if err != nil {
					t.Fatalf("%s: %v", b, err)
				}
				name, ok := tok.(string)
				if !ok {
					t.Fatalf("%s: %v where a key belongs", b, tok)
				}
				key := queue.Status(name)
				var n int64
				if err := dec.Decode(&n); err != nil {
					t.Fatalf("%s: the value of %s: %v", b, key, err)
				}
				if n != tc.want[key] {
					t.Errorf("%s: %s is %d, want %d", b, key, n, tc.want[key])
				}
				keys = append(keys, key)
			}
			if !slices.Equal(keys, queue.Statuses()) {
				t.Errorf("%s: keys %v, want queue.Statuses() %v in that order", b, keys, queue.Statuses())
			}
		})
	}
}
