package main

import (
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// Every benchmark that README.md, DESIGN.md or docs/*.md cites (a figure
// drawn from it) is run by a command the documentation shows: a
// `go test ... -bench PATTERN` (or a test binary's -test.bench) whose
// pattern selects it. README promises that docs/benchmarks.md holds
// "every measured figure, with the command that made it"; a figure whose
// benchmark no shown command runs cannot be checked by a reader.
func TestDocsBenchmarkFiguresCarryTheirCommand(t *testing.T) {
	t.Parallel()
	root := filepath.Join("..", "..")
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	files := []string{"README.md", "DESIGN.md"}
	for _, d := range docs {
		files = append(files, "docs/"+filepath.Base(d))
	}
	flag := regexp.MustCompile(`-(?:test\.)?bench[ =]'?([^'\s]+)'?`)
	var patterns []*regexp.Regexp
	var commands []string
	texts := map[string]string{}
	for _, f := range files {
		texts[f] = repoFile(t, f)
		for _, line := range strings.Split(texts[f], "\n") {
			for _, m := range flag.FindAllStringSubmatch(line, -1) {
				commands = append(commands, line)
				// go test matches the pattern's first /-separated part
				// against the top-level benchmark's name.
				first, _, _ := strings.Cut(m[1], "/")
				if re, err := regexp.Compile(first); err == nil {
					patterns = append(patterns, re)
				}
			}
		}
	}
	if len(patterns) == 0 {
		t.Fatal("no -bench command in the docs: the pattern is wrong")
	}
	cited := regexp.MustCompile("`(Benchmark[A-Z]\\w*)")
	for _, f := range files {
		for _, m := range cited.FindAllStringSubmatch(texts[f], -1) {
			name := m[1]
			covered := false
			for _, re := range patterns {
				if re.MatchString(name) {
					covered = true
					break
				}
			}
			for _, c := range commands {
				if strings.Contains(c, name) {
					covered = true
				}
			}
			if !covered {
				t.Errorf("%s cites %s (a figure), but no command in README.md, DESIGN.md or docs/ runs it", f, name)
			}
		}
	}
}

// The etcd section of docs/benchmarks.md gives the command of its table
// and says how many cycles each run measured: the two agree, so that a
// reader who runs the command measures what the table reports.
func TestEtcdBenchmarkCommandMatchesItsCycles(t *testing.T) {
	t.Parallel()
	_, section, ok := strings.Cut(repoFile(t, "docs/benchmarks.md"), "\n## etcd:")
	if !ok {
		t.Fatal("docs/benchmarks.md has no etcd section")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	cmd := regexp.MustCompile(`-bench BenchmarkAcquireRelease -benchtime (\d+)x`).FindStringSubmatch(section)
	said := regexp.MustCompile(`([\d,]+) cycles per run`).FindStringSubmatch(section)
	if cmd == nil || said == nil {
		t.Fatalf("the etcd section lost its command (%v) or its count of cycles (%v)", cmd, said)
	}
	if n := strings.ReplaceAll(said[1], ",", ""); n != cmd[1] {
		t.Errorf("docs/benchmarks.md's etcd table: the command runs -benchtime %sx, the text says %s cycles per run", cmd[1], said[1])
	}
}
