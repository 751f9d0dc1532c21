//go:build tools

// Package tools pins the versions of the code generators and migration tool
// this module uses, so that `go generate ./...` and `go run` resolve them
// from go.mod instead of whatever happens to be installed.
package tools

import (
	_ "github.com/pressly/goose/v3/cmd/goose"
	_ "github.com/sqlc-dev/sqlc/cmd/sqlc"
)
