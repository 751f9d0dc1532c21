package jobtext

import (
	"strings"
	"testing"
)

// TestProblem: the rule's cases, each with the words callers show.
func TestProblem(t *testing.T) {
	cases := []struct {
		name string
		s    string
		max  int
		want string // a part of the problem; "" for none
	}{
		{"plain", "send_email", MaxKind, ""},
		{"at the limit, counted in characters", strings.Repeat("é", MaxType), MaxType, ""},
		{"inner spaces", "daily report", MaxType, ""},
		{"empty", "", MaxType, "is empty"},
		{"invalid UTF-8", "a\xffb", MaxType, "is not valid UTF-8"},
		{"NUL", "a\x00b", MaxType, "contains a NUL character"},
		{"trailing space", "report ", MaxType, "ends with a space"},
		{"too long", strings.Repeat("x", MaxType+1), MaxType, "has 65 characters; at most 64 are allowed"},
		{"periodic name too long", strings.Repeat("x", MaxPeriodicName+1), MaxPeriodicName, "at most 200 are allowed"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := Problem(c.s, c.max)
			if (c.want == "") != (got == "") || !strings.Contains(got, c.want) {
				t.Errorf("Problem(%q, %d) = %q, want %q", c.s, c.max, got, c.want)
			}
		})
	}
}

func TestHasNULEscape(t *testing.T) {
	cases := map[string]bool{
		`{"a":"\u0000"}`:   true,
		`{"a":"x\u0000y"}`: true,
		`{"a":"\\u0000"}`:  false,
		`{"a":"\\\u0000"}`: true,
		`{"a":"\u00001"}`:  true,
		`{"a":"\u0001"}`:   false,
		`{"\u0000":1}`:     true,
		`{"a":"u0000"}`:    false,
		`"\\"`:             false,
	}
	for in, want := range cases {
		if got := HasNULEscape([]byte(in)); got != want {
			t.Errorf("HasNULEscape(%s) = %v, want %v", in, got, want)
		}
	}
}
