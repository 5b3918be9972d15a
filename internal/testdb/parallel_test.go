package testdb

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// lockTakers are the calls that take the host lock shared for the rest of a
// test: HoldHost and every private server or lab.
var lockTakers = map[string]bool{
	"HoldHost": true, "MariaDB": true, "PostgreSQL": true, "Redis": true, "Start": true,
}

// TestParallelBeforeLock finds tests that take the host lock and then call
// t.Parallel: Go pauses such a test until the serial tests are done, with
// the lock held, and a serial test waiting for the lock exclusively then
// waits for ever (the whole package times out).
func TestParallelBeforeLock(t *testing.T) {
	root := filepath.Join("..", "..")
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) && path != root {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Body == nil || !strings.HasPrefix(fn.Name.Name, "Test") {
				continue
			}
			var locked token.Pos
			for _, st := range fn.Body.List {
				ast.Inspect(st, func(n ast.Node) bool {
					if _, lit := n.(*ast.FuncLit); lit {
						return false // cleanups and subtests run later
					}
					call, ok := n.(*ast.CallExpr)
					if !ok {
						return true
					}
					sel, ok := call.Fun.(*ast.SelectorExpr)
					if !ok {
						return true
					}
					pkg, _ := sel.X.(*ast.Ident)
					switch {
					case sel.Sel.Name == "Parallel" && locked.IsValid():
						t.Errorf("%s: %s calls t.Parallel after it took the host lock (%s)", fset.Position(call.Pos()), fn.Name.Name, fset.Position(locked))
					case pkg != nil && lockTakers[sel.Sel.Name] && (pkg.Name == "testdb" || pkg.Name == "galeralab") && !locked.IsValid():
						locked = call.Pos()
					}
					return true
				})
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
