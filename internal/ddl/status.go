package ddl

import "strings"

// Statuses are the statuses a job goes through, in the order of its life
// (SPEC section 3): the one list of them. queue.Statuses, the MySQL ENUM
// of the status column (StatusEnum), the order in which an uninstall's
// refusal counts jobs (migrations) and the lists in the command line's
// and the dashboard's messages are derived from it; TestStatusesInSQL
// checks the statuses that sql/<engine>/*.sql spell out against it. A new
// slice each time.
func Statuses() []string {
	return []string{"pending", "in_progress", "completed", "failed", "expired"}
}

// StatusEnum is the MySQL type of the status column:
// ENUM('pending','in_progress',…) with the Statuses in their order.
func StatusEnum() string {
	return "ENUM('" + strings.Join(Statuses(), "','") + "')"
}
