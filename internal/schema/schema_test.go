package schema

import (
	"testing"

	"github.com/jobqueue/jobqueue/internal/engine"
)

// TestClassify covers the rule that tells a table's version from its
// columns, on the column sets each state has.
func TestClassify(t *testing.T) {
	set := func(lists ...[]string) map[string]Column {
		cols := map[string]Column{}
		for _, l := range lists {
			for _, c := range l {
				cols[c] = Column{Name: c, Type: "text"}
			}
		}
		return cols
	}
	mysqlV2 := func() map[string]Column {
		cols := set(CommonColumns, V2OnlyColumns)
		cols["status"] = Column{Name: "status", Type: "enum('pending','in_progress','completed','failed','expired')"}
		cols["created_at"] = Column{Name: "created_at", Type: "datetime"}
		return cols
	}
	withoutCommon := set(CommonColumns[1:], V2OnlyColumns)
	mysqlNoExpired := mysqlV2()
	mysqlNoExpired["status"] = Column{Name: "status", Type: "enum('pending','in_progress','completed','failed')"}
	mysqlTimestamp := mysqlV2()
	mysqlTimestamp["created_at"] = Column{Name: "created_at", Type: "timestamp"}
	cases := []struct {
		name string
		kind engine.Kind
		cols map[string]Column
		want State
	}{
		{"v1", engine.Postgres, set(CommonColumns, V1OnlyColumns), V1},
		{"v2", engine.Postgres, set(CommonColumns, V2OnlyColumns), V2},
		{"v2 plus user columns", engine.SQLite, set(CommonColumns, V2OnlyColumns, []string{"tenant"}), V2},
		{"v2 columns added, v1 ones left", engine.SQLite, set(CommonColumns, V1OnlyColumns, V2OnlyColumns), Partial},
		{"some v2 columns added", engine.Postgres, set(CommonColumns, V1OnlyColumns, V2OnlyColumns[:2]), Partial},
		{"retry_count dropped, locked_at left", engine.Postgres, set(CommonColumns, V1OnlyColumns[1:], V2OnlyColumns), Partial},
		{"neither version", engine.Postgres, set(CommonColumns), Foreign},
		{"a shared column missing", engine.Postgres, withoutCommon, Foreign},
		{"another program's table", engine.MySQL, set([]string{"id", "attempts", "payload"}), Foreign},
		{"mysql v2", engine.MySQL, mysqlV2(), V2},
		{"mysql status without expired", engine.MySQL, mysqlNoExpired, Partial},
		{"mysql created_at still TIMESTAMP", engine.MySQL, mysqlTimestamp, Partial},
	}
	for _, c := range cases {
		if got := Classify(c.kind, c.cols); got != c.want {
			t.Errorf("%s: Classify = %v, want %v", c.name, got, c.want)
		}
	}
}

func TestStateString(t *testing.T) {
	for s, want := range map[State]string{Missing: "missing", V1: "version 1", Partial: "partly migrated", V2: "version 2", Foreign: "not a jobqueue table", State(99): "schema.State(99)"} {
		if got := s.String(); got != want {
			t.Errorf("State(%d).String() = %q, want %q", int(s), got, want)
		}
	}
}
