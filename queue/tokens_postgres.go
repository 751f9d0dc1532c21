package queue

import (
	"encoding/json"
	"strconv"
)

// tokenObject is refs as the JSON object of token by id that the worker's
// PostgreSQL statements of attempts take (ExtendLeases, CompleteJobs,
// DeleteCompletedJobs: each row is matched with its own token by a lookup
// in the object). refs hold no id twice (chunkRefs).
func tokenObject(refs []attemptRef) json.RawMessage {
	b := make([]byte, 0, 2+len(refs)*56)
	b = append(b, '{')
	for i, r := range refs {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '"')
		b = strconv.AppendInt(b, r.ID, 10)
		b = append(b, '"', ':')
		b = appendJSONString(b, r.Token)
	}
	return append(b, '}')
}

// appendJSONString appends s as a JSON string: as it is between quotes when
// it needs no escaping (a claim token: hex digits, a dash and an id),
// through encoding/json otherwise.
func appendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == '"' || c == '\\' || c >= 0x80 {
			q, _ := json.Marshal(s)
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}
