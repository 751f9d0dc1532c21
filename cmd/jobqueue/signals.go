package main

import (
	"context"
	"os"
	"os/signal"
	"sync"
)

// notifyStops catches sigs: the first ends ctx (a graceful stop: work stops
// claiming and gives its running commands --grace), the second closes hard
// (a stop at once: work ends the grace, see workCommand); later ones are
// ignored. stop stops catching them (their default action is back) and ends
// ctx.
func notifyStops(parent context.Context, sigs ...os.Signal) (ctx context.Context, hard <-chan struct{}, stop func()) {
	caught := make(chan os.Signal, 2)
	signal.Notify(caught, sigs...)
	ctx, cancel := context.WithCancel(parent)
	hardStop := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		select {
		case <-caught:
			cancel()
		case <-stopped:
			return
		}
		select {
		case <-caught:
			close(hardStop)
		case <-stopped:
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
