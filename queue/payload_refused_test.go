package queue

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/go-sql-driver/mysql"
	"github.com/jobqueue/jobqueue/internal/engine"
)

// TestPayloadRefusedSaysWhatServerSaid: on MariaDB, an enqueue whose
// payload the server refuses as JSON (a lone surrogate escape, which
// encoding/json takes, as a custom codec may make it; or nesting beyond the
// server's parser) fails with ErrPayloadRejected naming the payload as the
// cause and giving the server's own message, and claims no cause the
// server did not give: it used to blame nesting depth for them all.
func TestPayloadRefusedSaysWhatServerSaid(t *testing.T) {
	forEachEngine(t, func(t *testing.T, kind engine.Kind) {
		if kind != engine.MySQL {
			t.Skip("MariaDB's refusals")
		}
		ctx := context.Background()
		env := coreEnv(t, kind)
		var version string
		if err := env.db.QueryRowContext(ctx, "SELECT VERSION()").Scan(&version); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(version, "MariaDB") {
			t.Skipf("the server is %s, not MariaDB", version)
		}
		q, _ := coreQueue(t, env)
		for _, c := range []struct {
			name, payload string
		}{
			{"lone surrogate", `{"a":"\ud800"}`},
			{"40 levels", strings.Repeat("[", 40) + strings.Repeat("]", 40)},
		} {
			_, err := q.Enqueue(ctx, RawArgs{Name: "refused", Payload: json.RawMessage(c.payload)})
			var me *mysql.MySQLError
			if !errors.Is(err, ErrPayloadRejected) || !errors.As(err, &me) {
				t.Errorf("%s: %v; want ErrPayloadRejected wrapping the server's error", c.name, err)
				continue
			}
			msg := err.Error()
			for _, s := range []string{"payload is the cause", me.Message} {
				if !strings.Contains(msg, s) {
					t.Errorf("%s: %q does not say %q", c.name, msg, s)
				}
			}
			if strings.Contains(msg, "nesting") || strings.Contains(msg, "levels") {
				t.Errorf("%s: %q claims a cause the server did not give", c.name, msg)
			}
		}
		if n := rowCount(t, env); n != 0 {
			t.Errorf("%d rows written; want none", n)
		}
	})
}
