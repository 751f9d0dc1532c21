package queue_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/jobqueue/jobqueue/queue"
)

// ExampleQueue_StatsUpTo reads what a dashboard's overview shows, quickly
// on any size of table: the types, counts that stop at a limit, and the
// pending job that has waited longest since it was due.
func ExampleQueue_StatsUpTo() {
	q, _, done := openExampleQueue()
	defer done()
	ctx := context.Background()
	for i, typ := range []string{"email", "email", "email", "sms"} {
		at := time.Now().Add(-time.Duration(i) * time.Minute) // the last email waited longest
		if _, err := q.Enqueue(ctx, SendEmail{To: fmt.Sprint(i)}, queue.Type(typ), queue.At(at)); err != nil {
			log.Fatal(err)
		}
	}

	types, more, err := q.Types(ctx, 50)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("types:", types, "more:", more)
	for _, typ := range types {
		counts, err := q.StatsUpTo(ctx, typ, 2) // "2" means 2 or more
		if err != nil {
			log.Fatal(err)
		}
		oldest, err := q.OldestDue(ctx, typ)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%s: pending %d, oldest due is job %d\n", typ, counts[queue.StatusPending], oldest.ID)
	}
	failures, err := q.RecentFailures(ctx, 10)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("failures:", len(failures))
	// Output:
	// types: [email sms] more: false
	// email: pending 2, oldest due is job 3
	// sms: pending 1, oldest due is job 4
	// failures: 0
}
