package engine

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"strings"
	"testing"

	"github.com/XSAM/otelsql"
	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/stdlib"
	"modernc.org/sqlite"
)

// connectorOf is a connector that never connects, with driver d: a *sql.DB
// on it shows d as its driver, and detection must not need a connection.
type connectorOf struct{ d driver.Driver }

func (c connectorOf) Connect(context.Context) (driver.Conn, error) {
	return nil, errors.New("connectorOf: detection must not connect")
}
func (c connectorOf) Driver() driver.Driver { return c.d }

// hooksDriver wraps a driver as sqlhooks does: embedded, exported.
type hooksDriver struct {
	driver.Driver
	hooks []string
}

// hiddenDriver wraps a driver in an unexported field, as otelsql and sqlmw
// do.
type hiddenDriver struct {
	name   string
	parent driver.Driver
}

func (h hiddenDriver) Open(dsn string) (driver.Conn, error) { return h.parent.Open(dsn) }

// opaqueDriver keeps the driver it wraps out of sight (in a closure): no
// detection can find it.
type opaqueDriver struct {
	open func(string) (driver.Conn, error)
}

func (o *opaqueDriver) Open(dsn string) (driver.Conn, error) { return o.open(dsn) }

func opaque(d driver.Driver) driver.Driver { return &opaqueDriver{open: d.Open} }

// plainDriver is a driver of another database.
type plainDriver struct{}

func (plainDriver) Open(string) (driver.Conn, error) { return nil, errors.New("plainDriver") }

func TestDetectThroughWrappers(t *testing.T) {
	t.Parallel()
	pg, my, lite := stdlib.GetDefaultDriver(), &mysql.MySQLDriver{}, &sqlite.Driver{}
	cases := []struct {
		name    string
		d       driver.Driver
		given   Kind
		want    Kind
		wantErr string // a part of the error; "" for none
	}{
		{"pgx", pg, "", Postgres, ""},
		{"mysql", my, "", MySQL, ""},
		{"mysql by value", mysql.MySQLDriver{}, "", MySQL, ""},
		{"sqlite", lite, "", SQLite, ""},
		{"otelsql pgx", otelsql.WrapDriver(pg), "", Postgres, ""},
		{"otelsql mysql", otelsql.WrapDriver(my), "", MySQL, ""},
		{"otelsql sqlite", otelsql.WrapDriver(lite), "", SQLite, ""},
		{"otelsql over otelsql", otelsql.WrapDriver(otelsql.WrapDriver(lite)), "", SQLite, ""},
		{"embedded exported field", &hooksDriver{Driver: my}, "", MySQL, ""},
		{"unexported field", hiddenDriver{parent: otelsql.WrapDriver(pg)}, "", Postgres, ""},
		{"explicit agrees", otelsql.WrapDriver(pg), Postgres, Postgres, ""},
		{"explicit contradicts", otelsql.WrapDriver(pg), MySQL, "", "driver (*otelsql.otDriver) is postgres's"},
		{"explicit for an opaque wrapper", opaque(otelsql.WrapDriver(lite)), SQLite, SQLite, ""},
		{"unknown wrapper", opaque(pg), "", "", `*engine.opaqueDriver is not pgx's stdlib`},
		{"unknown wrapper names the option", opaque(my), "", "", `name the engine with queue.WithEngine or migrations.WithEngine ("postgres", "mysql" or "sqlite")`},
		{"other database", plainDriver{}, "", "", "engine.plainDriver"},
		{"wrapper of another database", otelsql.WrapDriver(plainDriver{}), "", "", "and none of them was found inside it"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			db := sql.OpenDB(connectorOf{c.d})
			defer db.Close()
			got, err := Choose(db, c.given)
			if c.wantErr == "" {
				if err != nil || got != c.want {
					t.Fatalf("Choose = %q, %v; want %q", got, err, c.want)
				}
				return
			}
			if !errors.Is(err, ErrUnsupportedDatabase) || !strings.Contains(err.Error(), c.wantErr) {
				t.Fatalf("Choose = %q, %v; want ErrUnsupportedDatabase saying %q", got, err, c.wantErr)
			}
		})
	}
	for _, given := range []Kind{"", Postgres} {
		if _, err := Choose(nil, given); !errors.Is(err, ErrUnsupportedDatabase) {
			t.Errorf("Choose(nil, %q) = %v; want ErrUnsupportedDatabase", given, err)
		}
	}
}

// rawConn is a wrapper's connection with a Raw method, as otelsql's has.
type rawConn struct {
	driver.Conn
	inner driver.Conn
}

func (c rawConn) Raw() driver.Conn { return c.inner }

// unwrapConn is one with an Unwrap method.
type unwrapConn struct {
	driver.Conn
	inner driver.Conn
}

func (c unwrapConn) Unwrap() driver.Conn { return c.inner }

func TestPgxConnThroughWrappers(t *testing.T) {
	t.Parallel()
	pc := &stdlib.Conn{}
	cases := []struct {
		name string
		dc   any
		want *stdlib.Conn
	}{
		{"pgx", pc, pc},
		{"Raw", rawConn{inner: pc}, pc},
		{"Unwrap over Raw", unwrapConn{inner: rawConn{inner: pc}}, pc},
		{"opaque", struct{ driver.Conn }{pc}, nil},
		{"nil", nil, nil},
		{"endless", cycle(), nil},
	}
	for _, c := range cases {
		got, ok := PgxConn(c.dc)
		if got != c.want || ok != (c.want != nil) {
			t.Errorf("%s: PgxConn = %p, %v; want %p", c.name, got, ok, c.want)
		}
	}
}

// cycle is a connection whose Raw returns itself: PgxConn must give up.
func cycle() driver.Conn {
	c := &selfConn{}
	return c
}

type selfConn struct{ driver.Conn }

func (c *selfConn) Raw() driver.Conn { return c }
