package queue

import (
	"encoding/json"
	"testing"
)

// TestTokenObject: tokenObject is the JSON object of token by id, whatever
// the tokens hold (a well-formed token goes as it is, any other through
// encoding/json).
func TestTokenObject(t *testing.T) {
	for _, c := range []struct {
		name string
		refs []attemptRef
	}{
		{"none", nil},
		{"claim tokens", []attemptRef{{ID: 7, Token: attemptToken("0123abcd", 7)}, {ID: 9223372036854775807, Token: attemptToken("ff", 9223372036854775807)}}},
		{"tokens that need escaping", []attemptRef{{ID: 1, Token: `a"b\c`}, {ID: 2, Token: "tab\there"}, {ID: 3, Token: "é-3"}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			raw := tokenObject(c.refs)
			var got map[string]string
			if err := json.Unmarshal(raw, &got); err != nil {
				t.Fatalf("tokenObject gave %s: %v", raw, err)
			}
			want := map[string]string{}
			for _, r := range c.refs {
				b, _ := json.Marshal(r.ID)
				want[string(b)] = r.Token
			}
			if len(got) != len(want) {
				t.Fatalf("tokenObject gave %s, want the %d refs %v", raw, len(want), c.refs)
			}
			for k, v := range want {
				if got[k] != v {
					t.Errorf("tokenObject gave %s: id %s has %q, want %q", raw, k, got[k], v)
				}
			}
		})
	}
}
