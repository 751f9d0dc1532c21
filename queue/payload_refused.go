package queue

import (
	"errors"
	"fmt"
	"strings"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgconn"
)

// refusedPayload marks as ErrPayloadRejected the errors by which the
// database refuses, in an insert, a payload that encoding/json accepts:
//   - PostgreSQL's JSONB: a lone surrogate escape (\ud800) or another bad
//     escape (22P02, 22P05), a number beyond its numeric type (22003),
//     nesting too deep for its parser (54001);
//   - MySQL 8.0's JSON: bad text (3140), nesting deeper than 100 (3157);
//     MariaDB's JSON_VALID check on the payload column (4025), which
//     refuses, among others, nesting of 32 levels or more and a lone
//     surrogate escape, and whose error does not say why.
//
// Everything else of a job is checked before the insert, so these can only
// be the payload's. Other errors are returned as they are.
func refusedPayload(err error) error {
	var pe *pgconn.PgError
	var me *mysql.MySQLError
	switch {
	case errors.As(err, &pe):
		switch pe.Code {
		case "22P02", "22P05", "22003", "54001":
			return fmt.Errorf("%w: PostgreSQL cannot store it as JSONB: %v", ErrPayloadRejected, err)
		}
	case errors.As(err, &me):
		switch {
		case me.Number == 3140 || me.Number == 3157:
			// MySQL says why in its message.
			return fmt.Errorf("%w: the payload is the cause: the server refuses it as JSON: %w", ErrPayloadRejected, err)
		case me.Number == 4025 && strings.Contains(me.Message, "payload"):
			// MariaDB says only that the check failed, not why.
			return fmt.Errorf("%w: the payload is the cause: it fails the server's JSON_VALID check of the payload column (the server does not say why); check that what the codec makes is JSON the server takes: %w", ErrPayloadRejected, err)
		}
	}
	return err
}
