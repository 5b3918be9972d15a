package engine

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// engineSwitch matches a switch on an instance's engine or a case naming
// one: engine knowledge belongs in the engine's profile.
var engineSwitch = regexp.MustCompile(`\bcase\s+engine\.[A-Z]\w*|\bswitch\s+[^{;]*\bEngine\b[^{;]*\{`)

// TestNoEngineSwitchOutsideEngines reads every production Go file outside
// internal/engine and fails on a switch over the engine: adding an engine
// must be a change to its own package and the registry.
func TestNoEngineSwitchOutsideEngines(t *testing.T) {
	root := filepath.Join("..", "..")
	var files int
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if d.IsDir() {
			if rel == filepath.Join("internal", "engine") || d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".") && rel != "." {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		files++
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for i, line := range strings.Split(string(b), "\n") {
			if engineSwitch.MatchString(line) {
				t.Errorf("%s:%d: switch on the engine outside internal/engine (ask the instance's Profile): %s", rel, i+1, strings.TrimSpace(line))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 50 {
		t.Fatalf("read only %d Go files under %s: the walk missed the tree", files, root)
	}
}

// TestEngineSwitchPattern keeps the pattern honest: it must catch both
// forms and pass ordinary code.
func TestEngineSwitchPattern(t *testing.T) {
	for line, want := range map[string]bool{
		"\tcase engine.Postgres:":            true,
		"\tcase engine.MySQL, engine.Redis:": true,
		"\tswitch in.Engine {":               true,
		"\tswitch a.t.Engine {":              true,
		"\tif in.Engine != engine.MySQL {":   false,
		"\tswitch in.Flavor {":               false,
		"\tcase engineRank(x):":              false,
	} {
		if got := engineSwitch.MatchString(line); got != want {
			t.Errorf("%q: matched %v, want %v", line, got, want)
		}
	}
}
