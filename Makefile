# Developer shortcuts; CI runs `make ci` (bash .ci/run).
.PHONY: generate test vet bench demo ci soak

# Regenerate db/pggen, db/mysqlgen and db/sqlitegen with sqlc (pinned in tools.go).
generate:
	go generate ./...

# The README's test command (real PostgreSQL, MariaDB/MySQL and SQLite).
test:
	go test -count=1 -timeout 15m ./...

vet:
	go vet ./...

# Go benchmarks of the queue package only.
bench:
	go test -run '^$$' -bench . ./queue/

# The whole life of jobs on the embedded SQLite default.
demo:
	go run ./cmd/jobqueue demo

# Everything CI checks: servers, gofmt, vet, sqlc output, tests with every engine.
ci:
	bash .ci/run

# Soak (not in CI): JOBQUEUE_SOAK_JOBS jobs (default 1 000 000) through 4 `work --exec true`
# processes on a PostgreSQL server of its own, completed jobs pruned after 1 minute; prints the
# workers' RSS, the table's size and dead tuples and the drain rate every 10 s, and checks them.
soak:
	go test -tags soak -count=1 -run '^TestSoak$$' -v -timeout 6h ./cmd/jobqueue/
