package migrations

import (
	"os"
	"testing"
)

// TestMain removes, after the tests, the goose command that gooseBinary
// built for them.
func TestMain(m *testing.M) {
	code := m.Run()
	removeGooseBinary()
	os.Exit(code)
}
