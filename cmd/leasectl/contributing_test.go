package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestContributingNamesTheRequestChecks: CONTRIBUTING.md tells a new
// backend to check what each entry point takes with backendkit's shared
// checks (the Refuse functions, RenewMany, AnswerReused), naming each, so
// that a check added to backendkit is named there too; and each is one
// that every shipped backend calls, so that the claim holds of them.
func TestContributingNamesTheRequestChecks(t *testing.T) {
	t.Parallel()
	root := filepath.Join("..", "..")
	checks := map[string]bool{"RenewMany": true, "AnswerReused": true}
	fset := token.NewFileSet()
	files, err := filepath.Glob(filepath.Join(root, "backendkit", "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	refuse := regexp.MustCompile(`^Refuse[A-Z]`)
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range file.Decls {
			if fn, ok := d.(*ast.FuncDecl); ok && fn.Recv == nil && refuse.MatchString(fn.Name.Name) {
				checks[fn.Name.Name] = true
			}
		}
	}
	if len(checks) < 8 {
		t.Fatalf("backendkit's checks: %v; the pattern is wrong", checks)
	}
	contributing := repoFile(t, "CONTRIBUTING.md")
	for name := range checks {
		if !strings.Contains(contributing, "`backendkit."+name+"`") {
			t.Errorf("CONTRIBUTING.md does not name `backendkit.%s`, a check every backend makes", name)
		}
	}
	for _, dir := range []string{"memstore", "sqlstore/sqlite", "sqlstore/postgres", "kvstore/etcd"} {
		srcs, err := filepath.Glob(filepath.Join(root, filepath.FromSlash(dir), "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		var all strings.Builder
		for _, f := range srcs {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			all.Write(b)
		}
		for name := range checks {
			if !strings.Contains(all.String(), "backendkit."+name+"(") {
				t.Errorf("%s never calls backendkit.%s, which CONTRIBUTING.md tells every backend to call", dir, name)
			}
		}
	}
}
