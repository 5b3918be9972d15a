package testdb

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// SQL runs one statement on a private PostgreSQL as postgres and returns
// the first column of its single row ("" when it returns none).
func (s *Server) SQL(t testing.TB, sql string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := pgconn.Connect(ctx, fmt.Sprintf("host=%s port=%d user=postgres dbname=postgres", s.Socket, s.Port))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	res, err := c.Exec(ctx, sql).ReadAll()
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	if len(res) == 1 && len(res[0].Rows) == 1 && len(res[0].Rows[0]) > 0 {
		return string(res[0].Rows[0][0])
	}
	return ""
}

// PGSet makes name = value an ALTER SYSTEM entry of a private PostgreSQL
// and waits until new sessions run with it.
func (s *Server) PGSet(t testing.TB, name, value string) {
	t.Helper()
	s.SQL(t, fmt.Sprintf("ALTER SYSTEM SET %s = '%s'", name, value))
	s.SQL(t, "SELECT pg_reload_conf()")
	for i := 0; s.SQL(t, "SHOW "+name) != value; i++ {
		if i == 200 {
			t.Fatalf("the server did not reload %s = %s", name, value)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
