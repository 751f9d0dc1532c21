//go:build !race

package migrations

// raceEnabled: see migrate_race_test.go.
const raceEnabled = false
