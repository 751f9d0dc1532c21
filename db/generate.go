// Package db holds the Go code that sqlc generates from sql/<engine>/schema.sql
// and queries.sql: pggen (PostgreSQL), mysqlgen (MySQL/MariaDB) and sqlitegen
// (SQLite). The generated packages are committed and never edited by hand;
// run `go generate ./...` (or `make generate`) after changing the SQL.
//
// The queries name the table `jobs`; package queue sends them to the table
// chosen at run time.
package db

//go:generate go run github.com/sqlc-dev/sqlc/cmd/sqlc generate -f ../sqlc.yaml
