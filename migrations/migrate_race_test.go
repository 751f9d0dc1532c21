//go:build race

package migrations

// raceEnabled: the race detector slows modernc's SQLite tenfold or more,
// so TestMigrateLarge only logs its time then.
const raceEnabled = true
