package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"sync"
)

// notifyStops catches sigs: the first ends ctx (a graceful stop: work stops
// claiming and gives its running commands --grace, web shuts down giving
// requests in flight 5 seconds), the second closes hard (a stop at once:
// work ends the grace, see workCommand; web closes its connections, see
// serve), and the third calls exit, for a hard stop that is stuck (a
// database out of reach, say): the process must end then. stop stops
// catching them (their default action is back) and ends ctx.
func notifyStops(parent context.Context, exit func(), sigs ...os.Signal) (ctx context.Context, hard <-chan struct{}, stop func()) {
	caught := make(chan os.Signal, 3)
	signal.Notify(caught, sigs...)
	ctx, cancel := context.WithCancel(parent)
	hardStop := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		for _, step := range []func(){cancel, func() { close(hardStop) }, exit} {
			select {
			case <-caught:
				step()
			case <-stopped:
				return
			}
		}
	}()
	var once sync.Once
	return ctx, hardStop, func() {
		once.Do(func() {
			signal.Stop(caught)
			close(stopped)
			cancel()
		})
	}
}

// stoppedBySignal is err, the failure of a command whose context a stop
// signal ended (most likely that failure's cause: "context canceled"),
// saying so and what to do next: its open transaction was rolled back, but
// what it had committed before the signal stays.
func stoppedBySignal(err error) error {
	return fmt.Errorf("stopped by a signal before it finished: %w; what it had committed before the signal stays: check with 'jobqueue list' or 'jobqueue stats' before running it again", err)
}
