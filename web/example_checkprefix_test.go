package web_test

import (
	"fmt"

	"github.com/jobqueue/jobqueue/web"
)

// CheckPrefix checks a prefix from configuration before the dashboard is
// mounted (web.New returns the same error, NewHandler panics with it): it
// takes a clean path and returns it without its trailing slash, and refuses
// one that is no clean path or starts with one of the dashboard's own paths.
func ExampleCheckPrefix() {
	for _, p := range []string{"/queue/", "/", "queue", "/a/../b", "/jobs"} {
		clean, err := web.CheckPrefix(p)
		fmt.Printf("%q -> %q refused: %v\n", p, clean, err != nil)
	}

	q, done := exampleQueue()
	defer done()
	_, err := web.New(q, web.Options{Prefix: "/static/queue"})
	fmt.Println("New refuses it too:", err != nil)
	// Output:
	// "/queue/" -> "/queue" refused: false
	// "/" -> "" refused: false
	// "queue" -> "" refused: true
	// "/a/../b" -> "" refused: true
	// "/jobs" -> "" refused: true
	// New refuses it too: true
}
