package db

import (
	"context"
	"database/sql/driver"
	"reflect"
	"strings"

	"github.com/jackc/pgx/v5/stdlib"
)

// PostgreSQL cannot store the NUL character (U+0000) in a text value: a
// statement carrying one fails. Requests are refused at the API's edge when
// they hold one, but text also arrives from model answers, tools and
// fetched pages, where a stray NUL is noise; on SQLite it is stored as
// sent. nulFreeConnector drops NUL from every text argument on its way to
// PostgreSQL, so that such text is stored instead of failing the message
// or run that produced it. Byte slices (bytea) are left alone.

// nulFreeConnector opens pgx connections whose arguments are NUL-free.
type nulFreeConnector struct{ driver.Connector }

func (c nulFreeConnector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &nulFreeConn{conn.(*stdlib.Conn)}, nil
}

// nulFreeConn is a pgx connection whose CheckNamedValue, which database/sql
// calls for every argument of every statement, drops NUL from text. Every
// other method, and so every optional interface, is pgx's own.
type nulFreeConn struct{ *stdlib.Conn }

func (c *nulFreeConn) CheckNamedValue(nv *driver.NamedValue) error {
	switch v := nv.Value.(type) {
	case string:
		nv.Value = withoutNUL(v)
	case *string:
		if v != nil && strings.IndexByte(*v, 0) >= 0 {
			nv.Value = withoutNUL(*v)
		}
	case driver.Valuer:
		// JSON columns and other custom types become text here; pgx
		// would call Value itself. A nil pointer stands for NULL and
		// may not be called.
		if rv := reflect.ValueOf(v); rv.Kind() == reflect.Pointer && rv.IsNil() {
			break
		}
		if inner, err := v.Value(); err == nil {
			if s, ok := inner.(string); ok && strings.IndexByte(s, 0) >= 0 {
				nv.Value = withoutNUL(s)
			}
		}
	}
	return c.Conn.CheckNamedValue(nv)
}

func withoutNUL(s string) string {
	if strings.IndexByte(s, 0) < 0 {
		return s
	}
	return strings.ReplaceAll(s, "\x00", "")
}
