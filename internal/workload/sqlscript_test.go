package workload

import (
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/dbhost/dbhost/internal/engine"
)

func TestParseScriptExamples(t *testing.T) {
	for _, name := range []string{"kv_postgres.sql", "kv_mysql.sql"} {
		b, err := os.ReadFile("testdata/scripts/" + name)
		if err != nil {
			t.Fatal(err)
		}
		e := engine.Postgres
		if strings.Contains(name, "mysql") {
			e = engine.MySQL
		}
		s, err := ParseScript(string(b), e)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(s.Setup) < 2 || len(s.Reader) == 0 || len(s.Writer) == 0 || len(s.Params) == 0 {
			t.Errorf("%s: %d setup, %d reader, %d writer statements, %d params", name, len(s.Setup), len(s.Reader), len(s.Writer), len(s.Params))
		}
	}
}

func TestParseScriptPostgres(t *testing.T) {
	src := `-- a comment that is no directive
-- param id 1 1000
-- param k 5 5
-- setup
CREATE FUNCTION f() RETURNS int LANGUAGE plpgsql AS $body$
BEGIN RETURN 1; END; -- semicolons inside the body
$body$;
CREATE TABLE t (id int, s text);
-- reader
SELECT s::text, ':id;' AS "x:id;", $$ :k; $$ FROM t WHERE id = :id OR id = :k OR id = :id + 1 /* ; */
-- writer
BEGIN;
UPDATE t SET s = 'it''s' WHERE id = :k;
COMMIT
`
	s, err := ParseScript(src, engine.Postgres)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Setup) != 2 || !strings.Contains(s.Setup[0], "RETURN 1; END;") {
		t.Errorf("setup %q", s.Setup)
	}
	want := []Statement{{SQL: `SELECT s::text, ':id;' AS "x:id;", $$ :k; $$ FROM t WHERE id = $1 OR id = $2 OR id = $1 + 1`, Args: []string{"id", "k"}}}
	if !reflect.DeepEqual(s.Reader, want) {
		t.Errorf("reader\n%#v\nwant\n%#v", s.Reader, want)
	}
	wantW := []Statement{{SQL: "BEGIN"}, {SQL: "UPDATE t SET s = 'it''s' WHERE id = $1", Args: []string{"k"}}, {SQL: "COMMIT"}}
	if !reflect.DeepEqual(s.Writer, wantW) {
		t.Errorf("writer\n%#v\nwant\n%#v", s.Writer, wantW)
	}
	if !reflect.DeepEqual(s.Params, []Param{{"id", 1, 1000}, {"k", 5, 5}}) {
		t.Errorf("params %+v", s.Params)
	}
}

func TestParseScriptMySQL(t *testing.T) {
	src := "-- param id 1 10\n-- reader\n# a MySQL comment; with a semicolon\nSELECT 'a\\';b', `c;d`, @v := 1 FROM t WHERE a = :id AND b = :id;\n"
	s, err := ParseScript(src, engine.MySQL)
	if err != nil {
		t.Fatal(err)
	}
	want := []Statement{{SQL: "SELECT 'a\\';b', `c;d`, @v := 1 FROM t WHERE a = ? AND b = ?", Args: []string{"id", "id"}}}
	if !reflect.DeepEqual(s.Reader, want) {
		t.Errorf("reader\n%#v\nwant\n%#v", s.Reader, want)
	}
}

func TestParseScriptSectionEndsStatement(t *testing.T) {
	s, err := ParseScript("-- reader\nSELECT 1\n-- writer\nSELECT 2", engine.MySQL)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Reader) != 1 || s.Reader[0].SQL != "SELECT 1" || len(s.Writer) != 1 || s.Writer[0].SQL != "SELECT 2" {
		t.Errorf("reader %+v writer %+v", s.Reader, s.Writer)
	}
}

func TestParseScriptErrors(t *testing.T) {
	for src, want := range map[string]string{
		"SELECT 1;":                                 "line 1: statement before any section",
		"-- reader\nSELECT :nope;":                  "line 2: parameter :nope is not declared",
		"-- param a 1 2\n-- setup\nSELECT :a;":      "line 3: setup statements take no parameters",
		"-- reader\nSELECT 'open;\n":                "line 2: unterminated ' quote",
		"-- param a 2 1":                            "line 1: param a: range",
		"-- param a 1":                              "param wants",
		"-- param a-b 1 2":                          "param name",
		"-- param a 1 2\n-- param a 1 2":            "declared twice",
		"-- reader\n/* open":                        "unterminated /* comment",
		"-- setup\nDO $x$ BEGIN END":                "unterminated $x$ quote",
		"-- just comments\n":                        "no statements",
		"-- reader\nSELECT 1;\n\n\nSELECT \"x;\n\n": "line 5: unterminated \" quote",
	} {
		_, err := ParseScript(src, engine.Postgres)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %v, want %q", src, err, want)
		}
	}
}
