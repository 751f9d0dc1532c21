package testwait

import (
	"testing"
	"time"
)

// recorder is a testing.TB that records a Fatal instead of ending the test.
type recorder struct {
	testing.TB
	failed string
}

func (r *recorder) Helper() {}

func (r *recorder) Fatal(args ...any) {
	r.failed = args[0].(string)
	// Fatal ends the calling goroutine in a real test; Until must not
	// poll on after it.
	panic(r)
}

func TestUntil(t *testing.T) {
	for _, tc := range []struct {
		name      string
		trueAfter int // calls of cond before it holds; -1: never
		wantFail  string
		wantCalls int
	}{
		{name: "holds at once", trueAfter: 0, wantCalls: 1},
		{name: "holds on the third poll", trueAfter: 2, wantCalls: 3},
		{name: "never holds", trueAfter: -1, wantFail: "found 5"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &recorder{TB: t}
			calls := 0
			cond := func() bool {
				calls++
				return tc.trueAfter >= 0 && calls > tc.trueAfter
			}
			failure := func() string {
				if calls < 2 {
					return "polled too few times"
				}
				return "found 5"
			}
			func() {
				defer func() {
					if p := recover(); p != nil && p != r {
						panic(p)
					}
				}()
				Until(r, 50*time.Millisecond, time.Millisecond, cond, failure)
			}()
			if r.failed != tc.wantFail {
				t.Errorf("failed with %q, want %q", r.failed, tc.wantFail)
			}
			if tc.wantCalls > 0 && calls != tc.wantCalls {
				t.Errorf("cond called %d times, want %d", calls, tc.wantCalls)
			}
		})
	}
}

func TestForNamesWhatItWaitedFor(t *testing.T) {
	r := &recorder{TB: t}
	func() {
		defer func() {
			if p := recover(); p != nil && p != r {
				panic(p)
			}
		}()
		For(r, 20*time.Millisecond, time.Millisecond, "the drain", func() bool { return false })
	}()
	if want := "timed out after 20ms waiting for the drain"; r.failed != want {
		t.Errorf("failed with %q, want %q", r.failed, want)
	}
}
