// Package testwait waits, in tests, for a condition that something else
// brings about (another goroutine, process or server): it polls the
// condition until it holds or a deadline passes, and then fails the test
// saying what it found.
package testwait

import (
	"fmt"
	"testing"
	"time"
)

// For is Until for a wait that names what it waits for: once within has
// passed it fails t with "timed out after <within> waiting for <what>".
func For(t testing.TB, within, interval time.Duration, what string, cond func() bool) {
	t.Helper()
	Until(t, within, interval, cond, func() string {
		return fmt.Sprintf("timed out after %v waiting for %s", within, what)
	})
}

// Until calls cond every interval until it returns true. Once within has
// passed it fails t with what failure returns then (so the message can
// show the state last found).
func Until(t testing.TB, within, interval time.Duration, cond func() bool, failure func() string) {
	t.Helper()
	for deadline := time.Now().Add(within); !cond(); time.Sleep(interval) {
		if time.Now().After(deadline) {
			t.Fatal(failure())
		}
	}
}
