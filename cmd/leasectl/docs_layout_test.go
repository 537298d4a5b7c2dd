package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// DESIGN.md's Layout names every top-level directory of the module that
// holds Go code a user or a contributor meets (internal/ and the CI's
// dot-directories aside): a reader who learns the tree there finds each
// package the docs send them to (backendkit for backend authors,
// promobserver for metrics, examples/), in the pinned block or, as
// `name/`, in the lines this repository adds after it.
func TestDesignLayoutNamesEveryTopLevelPackage(t *testing.T) {
	t.Parallel()
	design := repoFile(t, "DESIGN.md")
	_, layout, ok := strings.Cut(design, "\n## Layout\n")
	if !ok {
		t.Fatal("DESIGN.md has no Layout section")
	}
	layout, _, _ = strings.Cut(layout, "\n## ")
	named := map[string]bool{}
	for _, m := range regexp.MustCompile("(?m)(?:^|`)([a-z][\\w.-]*)/").FindAllStringSubmatch(layout, -1) {
		named[m[1]] = true
	}
	root := filepath.Join("..", "..")
	entries, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		name := e.Name()
		if !e.IsDir() || strings.HasPrefix(name, ".") || name == "internal" || name == "docs" {
			continue
		}
		hasGo := false
		_ = filepath.WalkDir(filepath.Join(root, name), func(p string, d os.DirEntry, err error) error {
			if err == nil && !d.IsDir() && strings.HasSuffix(p, ".go") && !strings.HasSuffix(p, "_test.go") {
				hasGo = true
				return filepath.SkipAll
			}
			return nil
		})
		if hasGo && !named[name] {
			t.Errorf("DESIGN.md's Layout does not name %s/, a directory of Go code in the module", name)
		}
	}
}
