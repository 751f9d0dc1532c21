package queue

import (
	"database/sql"
	"testing"
)

// TestRoomForClaimSession: a claimer holds a connection of its own for its
// claims when the pool is not limited or has claimSessionMinFree
// connections free; the connections in use (listeners, other claim
// sessions, handlers) count against the limit.
func TestRoomForClaimSession(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name           string
		maxOpen, inUse int
		want           bool
	}{
		{"unlimited", 0, 50, true},
		{"exactly enough free", claimSessionMinFree, 0, true},
		{"too small", claimSessionMinFree - 1, 0, false},
		{"large, but too few free", claimSessionMinFree + 1, 2, false},
		{"large, enough free", 10, 10 - claimSessionMinFree, true},
		{"all in use", 10, 10, false},
	} {
		st := sql.DBStats{MaxOpenConnections: tc.maxOpen, InUse: tc.inUse}
		if got := roomForClaimSession(st); got != tc.want {
			t.Errorf("%s: roomForClaimSession(max %d, in use %d) = %v, want %v", tc.name, tc.maxOpen, tc.inUse, got, tc.want)
		}
	}
}
