package cli

import (
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

// repoText returns the text of a file of the repository (rel from its root).
func repoText(t *testing.T, rel string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "..", filepath.FromSlash(rel)))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// The root help is what an operator reads first: it names every DSN form
// openTarget accepts (the --dsn flag's line too) and every exit code
// leasectl exits with.
func TestRootHelpNamesEveryDSNFormAndExitCode(t *testing.T) {
	t.Parallel()
	o := runCLI(t, env{}, "--help")
	wantCode(t, o, ExitOK)
	for _, form := range []string{"postgres://", "sqlite:PATH", "http://HOST:PORT", "https://", "etcd://", "etcds://", "host=HOST"} {
		if !strings.Contains(o.stdout, form) {
			t.Errorf("root --help does not name the DSN form %q:\n%s", form, o.stdout)
		}
	}
	dsnLine := regexp.MustCompile(`(?m)^\s+--dsn string .*$`).FindString(o.stdout)
	if !strings.Contains(dsnLine, "etcd://") {
		t.Errorf("the --dsn flag's help does not name etcd://: %q", dsnLine)
	}
	_, codes, _ := strings.Cut(o.stdout, "Exit codes:")
	codes, _, _ = strings.Cut(codes, "\n\n")
	for _, c := range []int{ExitOK, ExitError, ExitUsage, ExitConflict, ExitRefused, ExitUnavailable, ExitLost,
		ExitAuth, ExitInterrupted, ExitStdoutClosed} {
		if !regexp.MustCompile(`(^|[\s;])` + strconv.Itoa(c) + ` `).MatchString(codes) {
			t.Errorf("root --help's exit codes do not name %d:%s", c, codes)
		}
	}
}

// serve --help names every route the served API has (the paths of
// httpapi's OpenAPI description, a {param} written as "...").
func TestServeHelpNamesEveryRoute(t *testing.T) {
	t.Parallel()
	o := runCLI(t, env{}, "serve", "--help")
	wantCode(t, o, ExitOK)
	var spec struct {
		Paths map[string]any `json:"paths"`
	}
	if err := json.Unmarshal([]byte(repoText(t, "httpapi/openapi.json")), &spec); err != nil {
		t.Fatal(err)
	}
	help := strings.Join(strings.Fields(o.stdout), " ")
	for p := range spec.Paths {
		short := p
		if i := strings.Index(p, "/{"); i >= 0 {
			short = p[:i] + "/..."
		}
		if !strings.Contains(help, short) {
			t.Errorf("serve --help does not name the route %s (as %s)", p, short)
		}
	}
}

// run --help names every code run exits with before CMD starts, as
// acquire does: 3 held, 5 no answer, 7 a served store refused the token,
// 130 interrupted; and CMD's own: 126, 127, 128+N; 6 the lease was lost.
func TestRunHelpNamesItsExitCodes(t *testing.T) {
	t.Parallel()
	o := runCLI(t, env{}, "run", "--help")
	wantCode(t, o, ExitOK)
	help := strings.Join(strings.Fields(o.stdout), " ")
	for _, want := range []string{"3 when the key is held", "5 when the store cannot answer", "7 when a served store refuses",
		"130 when interrupted", "127 (not found) or 126", "128 plus the signal's number", "run exits 6"} {
		if !strings.Contains(help, want) {
			t.Errorf("run --help does not say %q", want)
		}
	}
}

// docs/http-api.md's table of serve's flags has a row for each flag serve
// has (help and the global flags aside), and no other.
func TestHTTPAPIDocTablesEveryServeFlag(t *testing.T) {
	t.Parallel()
	documented := map[string]bool{}
	for _, m := range regexp.MustCompile("(?m)^\\| `--([a-z-]+)( [A-Z]+)?`(?:, `--([a-z-]+)`)? \\|").FindAllStringSubmatch(repoText(t, "docs/http-api.md"), -1) {
		documented[m[1]] = true
		if m[3] != "" {
			documented[m[3]] = true
		}
	}
	a := &app{getenv: env{}.get, defaultOwner: "u@h"}
	serve, _, err := a.rootCommand().Find([]string{"serve"})
	if err != nil {
		t.Fatal(err)
	}
	serve.LocalNonPersistentFlags().VisitAll(func(f *pflag.Flag) {
		if f.Name == "help" {
			return
		}
		if !documented[f.Name] {
			t.Errorf("docs/http-api.md's flag table has no row for serve's --%s", f.Name)
		}
		delete(documented, f.Name)
	})
	for name := range documented {
		t.Errorf("docs/http-api.md's flag table has a row for --%s, which serve does not have", name)
	}
}

// The operator guide's synopsis of the commands (the sh block under
// "## Commands") names every command leasectl has, and only flags that
// its command takes; so does DESIGN.md's (the block of the leasectl
// contract), for the commands it pins.
func TestOperatorGuideSynopsisMatchesTheCommands(t *testing.T) {
	t.Parallel()
	_, section, _ := strings.Cut(repoText(t, "docs/operator-guide.md"), "\n## Commands\n")
	m := regexp.MustCompile("(?s)```sh\n(.*?)```").FindStringSubmatch(section)
	if m == nil {
		t.Fatal("docs/operator-guide.md has no sh block under ## Commands")
	}
	checkSynopsis(t, "docs/operator-guide.md", m[1], true)
	m = regexp.MustCompile("(?s)```\n(leasectl acquire .*?)```").FindStringSubmatch(repoText(t, "DESIGN.md"))
	if m == nil {
		t.Fatal("DESIGN.md has no block of leasectl commands")
	}
	checkSynopsis(t, "DESIGN.md", m[1], false)
}

// checkSynopsis checks that each line of a synopsis block names a command
// of leasectl and flags that command takes; with all, that every command
// has a line.
func checkSynopsis(t *testing.T, file, block string, all bool) {
	t.Helper()
	a := &app{getenv: env{}.get, defaultOwner: "u@h"}
	root := a.rootCommand()
	seen := map[string]bool{}
	flagRe := regexp.MustCompile(`(?:^|[\s\[|])(--?[a-zA-Z][a-z-]*)`)
	for _, line := range strings.Split(block, "\n") {
		line, _, _ = strings.Cut(line, "#")
		fields := strings.Fields(line)
		if len(fields) < 2 || fields[0] != "leasectl" {
			continue
		}
		// The command path: words up to the first argument or flag
		// (alternatives such as up|status name each subcommand).
		var paths [][]string
		path := []string{}
		for _, w := range fields[1:] {
			if strings.ContainsAny(w, "[-") || strings.ToUpper(w) == w {
				break
			}
			if strings.Contains(w, "|") {
				for _, alt := range strings.Split(w, "|") {
					paths = append(paths, append(slices.Clone(path), alt))
				}
				path = nil
				break
			}
			path = append(path, w)
		}
		if path != nil {
			paths = append(paths, path)
		}
		for _, p := range paths {
			cmd, rest, err := root.Find(p)
			if err != nil || len(rest) > 0 || cmd == root {
				// A subcommand list such as completion's shells: its parent.
				cmd, _, err = root.Find(p[:1])
				if err != nil {
					t.Errorf("%s: synopsis line %q: no command %v", file, line, p)
					continue
				}
			}
			for c := cmd; c != nil; c = c.Parent() {
				seen[c.CommandPath()] = true
			}
			for _, f := range flagRe.FindAllStringSubmatch(line, -1) {
				name := f[1]
				var fl *pflag.Flag
				if long, ok := strings.CutPrefix(name, "--"); ok {
					fl = cmd.Flags().Lookup(long)
					if fl == nil {
						fl = cmd.InheritedFlags().Lookup(long)
					}
				} else if len(name) == 2 {
					fl = cmd.Flags().ShorthandLookup(name[1:])
					if fl == nil {
						fl = cmd.InheritedFlags().ShorthandLookup(name[1:])
					}
				} else {
					continue // not a flag (a negative number, a word)
				}
				if fl == nil {
					t.Errorf("%s: synopsis line %q: %s has no flag %s", file, strings.TrimSpace(line), cmd.CommandPath(), name)
				}
			}
		}
	}
	for _, c := range root.Commands() {
		if c.Name() == "help" || !all {
			continue
		}
		if !seen[c.CommandPath()] {
			t.Errorf("%s's synopsis has no line for %s", file, c.CommandPath())
		}
	}
}

// The root help's table of DSN forms reads as two columns: every
// description, and every line that goes on with one, starts at the same
// column. The http line's started two columns right of the others, and
// the lines that went on one column left.
func TestRootHelpDSNTableIsAligned(t *testing.T) {
	t.Parallel()
	o := runCLI(t, env{}, "--help")
	wantCode(t, o, ExitOK)
	_, table, _ := strings.Cut(o.stdout, "in the working directory:\n")
	table, _, _ = strings.Cut(table, "\n\n")
	cols := map[int]bool{}
	for _, line := range strings.Split(table, "\n") {
		// The description starts after the first run of two or more
		// spaces past the form, or after the indent of a line going on.
		trimmed := strings.TrimLeft(line, " ")
		col := len(line) - len(trimmed)
		if col == 2 {
			i := strings.Index(trimmed, "  ")
			if i < 0 {
				t.Fatalf("DSN line without a description: %q", line)
			}
			col += i + len(trimmed[i:]) - len(strings.TrimLeft(trimmed[i:], " "))
		}
		cols[col] = true
	}
	if len(cols) != 1 {
		t.Errorf("the root help's DSN descriptions start at columns %v, want one:\n%s", slices.Sorted(maps.Keys(cols)), table)
	}
}
