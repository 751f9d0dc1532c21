package web

import "github.com/jobqueue/jobqueue/queue"

// listFilter is f as the queue's filter, asking for limit jobs.
func listFilter(f jobsFilter, limit int) queue.ListFilter {
	return queue.ListFilter{Status: f.Status, Type: f.Type, Name: f.Name, Limit: limit, AfterID: f.AfterID}
}
