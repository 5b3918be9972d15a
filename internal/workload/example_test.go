package workload_test

import (
	"fmt"

	"github.com/dbhost/dbhost/internal/engine"
	"github.com/dbhost/dbhost/internal/workload"
)

func ExampleParseScript() {
	src := `-- param id 1 100000
-- setup
CREATE TABLE kv (id int PRIMARY KEY, v int NOT NULL);
-- reader
SELECT v FROM kv WHERE id = :id;
-- writer
BEGIN;
UPDATE kv SET v = v + 1 WHERE id = :id OR id = :id + 1;
COMMIT;
`
	for _, e := range []engine.Engine{engine.Postgres, engine.MySQL} {
		s, err := workload.ParseScript(src, e)
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Printf("%s: %q\n", e, s.Writer[1].SQL)
		fmt.Printf("%s: binds %v, each in [%d, %d]\n", e, s.Writer[1].Args, s.Params[0].Low, s.Params[0].High)
	}
	// Output:
	// postgres: "UPDATE kv SET v = v + 1 WHERE id = $1 OR id = $1 + 1"
	// postgres: binds [id], each in [1, 100000]
	// mysql: "UPDATE kv SET v = v + 1 WHERE id = ? OR id = ? + 1"
	// mysql: binds [id id], each in [1, 100000]
}
