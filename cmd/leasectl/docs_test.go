package main

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leasestore/leasestore/cmd/leasectl/cli"
	"github.com/leasestore/leasestore/internal/testkit/pgtest"
	"github.com/leasestore/leasestore/internal/testkit/testca"
)

// The programs and scripts of README.md and docs/ are compiled and run here,
// where they stand: a change to the text that breaks one fails a test.

// repoFile returns the text of a file of the repository (rel from its root).
func repoFile(t *testing.T, rel string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", filepath.FromSlash(rel)))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// codeBlocks returns the fenced blocks of language lang in the markdown
// file rel, in order.
func codeBlocks(t *testing.T, rel, lang string) []string {
	t.Helper()
	var blocks []string
	for _, m := range regexp.MustCompile("(?s)```"+lang+"\n(.*?)```\n").FindAllStringSubmatch(repoFile(t, rel), -1) {
		blocks = append(blocks, m[1])
	}
	return blocks
}

// codeBlock returns the one block of language lang in rel that contains
// marker.
func codeBlock(t *testing.T, rel, lang, marker string) string {
	t.Helper()
	var found []string
	for _, b := range codeBlocks(t, rel, lang) {
		if strings.Contains(b, marker) {
			found = append(found, b)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%s has %d %s blocks containing %q, want 1", rel, len(found), lang, marker)
	}
	return found[0]
}

// buildProgram compiles a Go block (a whole main package) as a package of
// this module, through an overlay (nothing is written into the
// repository), and returns the binary's path.
func buildProgram(t *testing.T, name, src string) string {
	t.Helper()
	if !strings.HasPrefix(src, "package main\n") {
		t.Fatalf("go block %s is not a whole program (package main, imports):\n%s", name, src)
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "main.go")
	if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	pkg := filepath.Join("_docs", name)
	overlay, _ := json.Marshal(map[string]any{"Replace": map[string]string{filepath.Join(wd, pkg, "main.go"): file}})
	if err := os.WriteFile(filepath.Join(dir, "overlay.json"), overlay, 0o644); err != nil {
		t.Fatal(err)
	}
	exe := filepath.Join(dir, name)
	out, err := exec.Command("go", "build", "-overlay="+filepath.Join(dir, "overlay.json"), "-o", exe, "./"+pkg).CombinedOutput()
	if err != nil {
		t.Fatalf("go block %s does not compile: %v\n%s", name, err, out)
	}
	return exe
}

// The library quick start (docs/library.md) compiles, runs to its end,
// says what it acquired, and leaves the key free (acquire and release in
// the trail). README's 15 lines are that program's own lines, so they
// compile and run with it.
func TestLibraryQuickStart(t *testing.T) {
	t.Parallel()
	src := codeBlock(t, "docs/library.md", "go", "sqlite.OpenDB(")
	taste := codeBlocks(t, "README.md", "go")
	if len(taste) != 1 {
		t.Fatalf("README.md has %d go blocks, want the library taste alone", len(taste))
	}
	if n := strings.Count(taste[0], "\n"); n > 15 {
		t.Errorf("README's library taste has %d lines, want at most 15", n)
	}
	if !strings.Contains(src, indent(taste[0])) {
		t.Fatalf("README's library taste is not part of docs/library.md's quick start:\n%s", taste[0])
	}
	exe := buildProgram(t, "quickstart", src)
	dir := t.TempDir()
	cmd := exec.Command(exe)
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("the quick start failed: %v\n%s", err, out)
	}
	if want := "acquired billing/invoice-run with fencing token 1\n"; string(out) != want {
		t.Errorf("the quick start printed %q, want %q", out, want)
	}
	c := leasectl{dir: dir, dsn: "sqlite:" + filepath.Join(dir, "leases.db")}
	r := c.runJSON(t, 0, "audit", "-n", "billing", "--key", "invoice-run")
	var ops []string
	for _, rec := range r["records"].([]any) {
		ops = append(ops, rec.(map[string]any)["op"].(string))
	}
	if strings.Join(ops, " ") != "release acquire" { // newest first
		t.Fatalf("the quick start left the records %v (newest first), want release, acquire", ops)
	}
}

// indent returns a block's lines indented by one tab (blank lines stay
// empty), as they stand in a function body.
func indent(block string) string {
	lines := strings.Split(strings.TrimSuffix(block, "\n"), "\n")
	for i, l := range lines {
		if l != "" {
			lines[i] = "\t" + l
		}
	}
	return strings.Join(lines, "\n") + "\n"
}

// The PostgreSQL program of docs/library.md runs on a DSN whose schema does
// not exist yet (as a team's first DSN for leasestore), holds its lease
// until Ctrl-C and then releases it.
func TestLibraryPostgres(t *testing.T) {
	t.Parallel()
	exe := buildProgram(t, "postgres", codeBlock(t, "docs/library.md", "go", "postgres.Open("))
	dsn, _ := pgtest.MissingSchemaDSN(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, exe)
	cmd.Env = append(os.Environ(), "LEASESTORE_DSN="+dsn)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(stderr)
	if !sc.Scan() || !strings.Contains(sc.Text(), "holding scanner/10.0.0.0/24 with token") {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatalf("the PostgreSQL program did not take its lease: %q", sc.Text())
	}
	c := leasectl{dir: t.TempDir(), dsn: dsn}
	c.runJSON(t, 0, "get", "10.0.0.0/24", "-n", "scanner")
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	for sc.Scan() {
		t.Logf("program: %s", sc.Text())
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("the PostgreSQL program after Ctrl-C: %v", err)
	}
	c.runJSON(t, 4, "get", "10.0.0.0/24", "-n", "scanner") // released, not left to expire
}

// The Go client program of docs/http-api.md, run against leasectl serve,
// prints its token and gives the lease back before it exits.
func TestHTTPClientProgram(t *testing.T) {
	t.Parallel()
	exe := buildProgram(t, "httpclient", codeBlock(t, "docs/http-api.md", "go", "func main()"))
	dir := t.TempDir()
	dsn := "sqlite:" + filepath.Join(dir, "leases.db")
	s := startServe(t, dir, dsn, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, exe)
	cmd.Env = append(os.Environ(), "LEASESTORE_DSN="+s.url)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("the HTTP client program failed: %v\n%s", err, out)
	}
	if !strings.HasPrefix(string(out), "holding billing/invoice-run with token ") {
		t.Errorf("the HTTP client program printed %q", out)
	}
	c := leasectl{dir: dir, dsn: dsn}
	c.runJSON(t, 4, "get", "invoice-run", "-n", "billing") // released, not left held
}

// The private-CA lines of docs/http-api.md compile and, in a program
// given leasectl serve's https URL and the CA's certificate file, reach a
// server whose certificate that private CA signed.
func TestHTTPClientPrivateCA(t *testing.T) {
	t.Parallel()
	src := programAround(t, "docs/http-api.md", "RootCAs: roots",
		[]string{"context", "crypto/tls", "crypto/x509", "fmt", "log", "net/http", "os", "time",
			"github.com/leasestore/leasestore/httpapi", "github.com/leasestore/leasestore/protocol"}, `
func main() {
	if err := run(os.Args[1], os.Args[2]); err != nil {
		log.Fatal(err)
	}
}

func run(url, caFile string) error {
`, `	key := protocol.Key{Namespace: "billing", Name: "private-ca"}
	res, err := store.Acquire(context.Background(), protocol.AcquireRequest{Key: key, Owner: "worker-1", TTL: time.Minute})
	if err != nil {
		return err
	}
	fmt.Println(res.Status)
	return nil
}
`)
	exe := buildProgram(t, "privateca", src)
	dir := t.TempDir()
	ca := testca.New(t, "docs")
	cert, key := ca.Server(t)
	s := startServe(t, dir, "sqlite:"+filepath.Join(dir, "leases.db"), nil, "--tls-cert", cert, "--tls-key", key)
	if !strings.HasPrefix(s.url, "https://") {
		t.Fatalf("url %s", s.url)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, exe, s.url, ca.CertFile).CombinedOutput()
	if err != nil || string(out) != "acquired\n" {
		t.Fatalf("the private-CA lines: %v\n%s", err, out)
	}
}

// runScript runs a bash block with leasectl on PATH, in a fresh directory
// whose SQLite file is the store, and returns its stdout.
func runScript(t *testing.T, script string) (stdout, stderr string) {
	t.Helper()
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-e", "-c", script)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(bin)+string(os.PathListSeparator)+os.Getenv("PATH"),
		"LEASESTORE_DSN=sqlite:"+filepath.Join(dir, "leases.db"), "NO_COLOR=1")
	var out, errOut strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		t.Fatalf("the block failed: %v\nstdout:\n%s\nstderr:\n%s", err, out.String(), errOut.String())
	}
	return out.String(), errOut.String()
}

// README's five lines of leasectl run as written: the acquire's token
// comes back, get shows the holder, run runs its command under a lease,
// the release takes, and audit shows every change.
func TestReadmeCLITaste(t *testing.T) {
	t.Parallel()
	blocks := codeBlocks(t, "README.md", "bash")
	if len(blocks) != 1 {
		t.Fatalf("README.md has %d bash blocks, want the CLI taste alone", len(blocks))
	}
	if n := strings.Count(blocks[0], "\n"); n != 5 {
		t.Errorf("README's CLI taste has %d lines, want 5", n)
	}
	out, stderr := runScript(t, blocks[0])
	for _, want := range []string{"worker-1", "one at a time, token 2\n", "release", "invoice-run"} {
		if !strings.Contains(out, want) {
			t.Errorf("README's CLI lines printed no %q:\nstdout:\n%s\nstderr:\n%s", want, out, stderr)
		}
	}
}

// The operator guide's block of leasectl run, acquire --wait and watch runs
// as written on a fresh SQLite store: the two runs take turns with
// increasing tokens, the deploy step takes and gives back its lease, and
// watch prints the four changes of the report's key.
func TestOperatorGuideWaitRunWatchScript(t *testing.T) {
	t.Parallel()
	out, stderr := runScript(t, codeBlock(t, "docs/operator-guide.md", "bash", "# leasectl run, acquire --wait and watch\n"))
	if !strings.Contains(out, "report with token 1\n") || !strings.Contains(out, "report with token 2\n") ||
		!strings.Contains(out, "deploying with fencing token 3\n") {
		t.Fatalf("the block printed:\n%s\nwant the two reports (tokens 1, 2) and the deploy (token 3)\nstderr:\n%s", out, stderr)
	}
	var ops []string
	for _, line := range strings.Split(out, "\n") {
		if !strings.HasPrefix(line, "{") {
			continue
		}
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("watch printed %q: %v", line, err)
		}
		if rec["key"] != "nightly-report" {
			t.Fatalf("watch of nightly-report printed %v", rec)
		}
		ops = append(ops, rec["op"].(string))
	}
	if strings.Join(ops, " ") != "acquire release acquire release" {
		t.Fatalf("watch printed the changes %v, want acquire release acquire release\nstdout:\n%s", ops, out)
	}
}

// pendingPages are pages the documentation links to that other work adds;
// a link to one of them may point nowhere until it lands. (None now.)
var pendingPages = map[string]bool{}

// Every relative link of README.md, CHANGELOG.md, CONTRIBUTING.md,
// DESIGN.md and docs/*.md names a file of the repository and, with a
// #fragment, a heading of that file (GitHub's anchors): moving a section
// cannot leave a link behind.
func TestDocLinks(t *testing.T) {
	t.Parallel()
	root := filepath.Join("..", "..")
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	files := []string{"README.md", "CHANGELOG.md", "CONTRIBUTING.md", "DESIGN.md"}
	for _, d := range docs {
		files = append(files, "docs/"+filepath.Base(d))
	}
	link := regexp.MustCompile(`\]\(([^)\s]+)\)`)
	for _, f := range files {
		text := stripCode(repoFile(t, f))
		for _, m := range link.FindAllStringSubmatch(text, -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			file, frag, _ := strings.Cut(target, "#")
			rel := f
			if file != "" {
				rel = filepath.ToSlash(filepath.Clean(filepath.Join(filepath.Dir(f), file)))
			}
			if _, err := os.Stat(filepath.Join(root, rel)); err != nil {
				if !pendingPages[rel] {
					t.Errorf("%s links to %s: no such file", f, target)
				}
				continue
			}
			if frag != "" && !anchors(t, rel)[frag] {
				t.Errorf("%s links to %s: %s has no heading with that anchor", f, target, rel)
			}
		}
	}
}

// stripCode removes fenced code blocks, whose brackets are not links.
func stripCode(md string) string {
	return regexp.MustCompile("(?s)```.*?```").ReplaceAllString(md, "")
}

// anchors returns the anchors GitHub gives the headings of a markdown file:
// lower case, spaces to hyphens, punctuation but hyphens and underscores
// dropped.
func anchors(t *testing.T, rel string) map[string]bool {
	out := map[string]bool{}
	for _, line := range strings.Split(stripCode(repoFile(t, rel)), "\n") {
		h := strings.TrimLeft(line, "#")
		if h == line || !strings.HasPrefix(h, " ") {
			continue
		}
		var b strings.Builder
		for _, r := range strings.ToLower(strings.TrimSpace(h)) {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r > 127 && r != '—' && r != '–':
				b.WriteRune(r)
			}
		}
		out[b.String()] = true
	}
	return out
}

// The retention lines of docs/library.md compile and run in a program that
// has the backend they name.
func TestLibraryRetentionLines(t *testing.T) {
	t.Parallel()
	src := programAround(t, "docs/library.md", "audit.Retain(",
		[]string{"context", "log", "time", "github.com/leasestore/leasestore/audit",
			"github.com/leasestore/leasestore/migrations", "github.com/leasestore/leasestore/sqlstore/sqlite"}, `
func main() {
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	db, err := sqlite.OpenDB("leases.db")
	if err != nil {
		log.Fatal(err)
	}
	if _, err := migrations.Up(ctx, migrations.SQLite, db); err != nil {
		log.Fatal(err)
	}
	backend, err := sqlite.New(ctx, db, nil)
	if err != nil {
		log.Fatal(err)
	}
`, `	<-ctx.Done()
}
`)
	exe := buildProgram(t, "retention", src)
	cmd := exec.Command(exe)
	cmd.Dir = t.TempDir()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the retention lines failed: %v\n%s", err, out)
	}
}

// programAround returns a main package that imports imports and holds the
// one Go block of rel containing marker, indented, between head and tail.
func programAround(t *testing.T, rel, marker string, imports []string, head, tail string) string {
	t.Helper()
	var b strings.Builder
	b.WriteString("package main\n\nimport (\n")
	for _, imp := range imports {
		b.WriteString("\t" + strconv.Quote(imp) + "\n")
	}
	b.WriteString(")\n" + head + indent(codeBlock(t, rel, "go", marker)) + tail)
	return b.String()
}

// Every test or benchmark that README.md, DESIGN.md, CONTRIBUTING.md or docs/*.md cites by
// name (`TestX`, `BenchmarkX`, with or without a /subtest) is a function of
// some _test.go file of the repository: a claim cannot point at a test that
// was renamed or removed.
func TestDocsCiteRealTests(t *testing.T) {
	t.Parallel()
	root := filepath.Join("..", "..")
	defined := map[string]bool{}
	fn := regexp.MustCompile(`(?m)^func ((?:Test|Benchmark|Fuzz)\w+)\(`)
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range fn.FindAllSubmatch(b, -1) {
			defined[string(m[1])] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	files := []string{"README.md", "DESIGN.md", "CONTRIBUTING.md"}
	for _, d := range docs {
		files = append(files, "docs/"+filepath.Base(d))
	}
	cited := regexp.MustCompile("`((?:Test|Benchmark|Fuzz)[A-Z]\\w*)[/`\\s]")
	n := 0
	for _, f := range files {
		for _, m := range cited.FindAllStringSubmatch(repoFile(t, f), -1) {
			n++
			if !defined[m[1]] {
				t.Errorf("%s cites %s: no _test.go file defines it", f, m[1])
			}
		}
	}
	if n == 0 {
		t.Fatal("no test cited in the docs: the pattern is wrong")
	}
	t.Logf("%d citations of %d tests and benchmarks checked", n, len(defined))
}

// TestOperatorGuideExitCodes: the operator guide's table of exit codes
// has a row for each code leasectl exits with, and no other.
func TestOperatorGuideExitCodes(t *testing.T) {
	t.Parallel()
	guide := repoFile(t, "docs/operator-guide.md")
	_, section, _ := strings.Cut(guide, "\n## Exit codes\n")
	section, _, _ = strings.Cut(section, "\n## ")
	var rows []string
	for _, m := range regexp.MustCompile(`(?m)^\| (\d+) \|`).FindAllStringSubmatch(section, -1) {
		rows = append(rows, m[1])
	}
	codes := []int{cli.ExitOK, cli.ExitError, cli.ExitUsage, cli.ExitConflict, cli.ExitRefused, cli.ExitUnavailable, cli.ExitLost,
		cli.ExitAuth, cli.ExitInterrupted, cli.ExitStdoutClosed}
	var want []string
	for _, c := range codes {
		want = append(want, strconv.Itoa(c))
	}
	slices.Sort(rows)
	slices.Sort(want)
	if !slices.Equal(rows, want) {
		t.Fatalf("docs/operator-guide.md's exit codes table has rows %v, want %v", rows, want)
	}
}

// README's two shell blocks hold what they claim: the first block of the
// README is the quick start, exactly the demo and the test command (the
// demo is a command of this leasectl, `make test` a target of the Makefile
// that runs the tests); the install block names this module and, for go
// install, a main package of it. (The demo itself runs in TestDemo.)
func TestReadmeShellBlocks(t *testing.T) {
	t.Parallel()
	readme := repoFile(t, "README.md")
	first := regexp.MustCompile("(?s)```(\\w*)\n(.*?)```\n").FindStringSubmatch(readme)
	if first == nil || first[1] != "sh" {
		t.Fatalf("README's first code block is not the sh quick start: %q", first)
	}
	if got := shellCommands(first[2]); !slices.Equal(got, []string{"go run ./cmd/leasectl demo", "make test"}) {
		t.Fatalf("README's quick start runs %q, want the demo and make test", got)
	}
	c := leasectl{dir: t.TempDir()}
	if r := c.run(t, "demo", "--help"); r.code != 0 {
		t.Errorf("leasectl demo --help exited %d: %s", r.code, r.stderr)
	}
	out, err := exec.Command("make", "-C", filepath.Join("..", ".."), "-n", "test").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "test -race") {
		t.Errorf("make -n test: %v\n%s", err, out)
	}

	blocks := codeBlocks(t, "README.md", "sh")
	if len(blocks) != 2 {
		t.Fatalf("README.md has %d sh blocks, want the quick start and the install lines", len(blocks))
	}
	module := regexp.MustCompile(`(?m)^module (\S+)$`).FindStringSubmatch(repoFile(t, "go.mod"))[1]
	install := shellCommands(blocks[1])
	if len(install) != 2 {
		t.Fatalf("README's install block runs %q, want go get and go install", install)
	}
	if want := "go get " + module; install[0] != want {
		t.Errorf("README's install block runs %q, want %q", install[0], want)
	}
	pkg, ok := strings.CutPrefix(install[1], "go install "+module+"/")
	pkg, latest := strings.CutSuffix(pkg, "@latest")
	if !ok || !latest {
		t.Fatalf("README's install block runs %q, want go install %s/...@latest", install[1], module)
	}
	if !strings.Contains(repoFile(t, pkg+"/main.go"), "package main\n") {
		t.Errorf("README installs %s, which is not a main package", pkg)
	}
}

// shellCommands returns the commands of a shell block: each line without
// its comment and surrounding blanks, empty lines left out.
func shellCommands(block string) []string {
	var cmds []string
	for _, l := range strings.Split(block, "\n") {
		l, _, _ = strings.Cut(l, " #")
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			cmds = append(cmds, l)
		}
	}
	return cmds
}

// The Go lines of docs/etcd.md compile in a function that has the ctx and
// dsn they name, returns an error, and uses the store they make.
func TestEtcdLinesCompile(t *testing.T) {
	t.Parallel()
	buildProgram(t, "etcdlines", programAround(t, "docs/etcd.md", "etcd.ParseDSN(",
		[]string{"context", "os", "github.com/leasestore/leasestore/kvstore/etcd", "github.com/leasestore/leasestore/protocol"}, `
func main() {
	if err := run(context.Background(), os.Getenv("LEASESTORE_DSN")); err != nil {
		os.Exit(1)
	}
}

func run(ctx context.Context, dsn string) error {
`, `	defer store.Close(ctx)
	_, err = store.Get(ctx, protocol.GetRequest{Key: protocol.Key{Namespace: "billing", Name: "invoice-run"}})
	return err
}
`))
}

// The PostgreSQL major version is one story: the one the project's
// machines and CI run (DESIGN.md; .ci/run installs Debian's), which
// postgres.md names, is the one docker compose, testcontainers, the
// Makefile and docs/testing.md start. They said 16 while postgres.md and
// the tests' server said 15.
func TestPostgresVersionIsOneStory(t *testing.T) {
	t.Parallel()
	major := func(what, text, pattern string) string {
		t.Helper()
		m := regexp.MustCompile(pattern).FindStringSubmatch(text)
		if m == nil {
			t.Fatalf("%s: no PostgreSQL version matching %s", what, pattern)
		}
		return m[1]
	}
	want := major("DESIGN.md", repoFile(t, "DESIGN.md"), `a PostgreSQL (\d+) server listens on 127\.0\.0\.1:5432`)
	for what, got := range map[string]string{
		"docs/postgres.md":       major("docs/postgres.md", repoFile(t, "docs/postgres.md"), `PostgreSQL (\d+) in this repository's tests`),
		"docker-compose.yml":     major("docker-compose.yml", repoFile(t, "docker-compose.yml"), `image: postgres:(\d+)`),
		"pgtest.ContainerImage":  major("pgtest.ContainerImage", pgtest.ContainerImage, `^postgres:(\d+)`),
		"Makefile db-up":         major("Makefile", repoFile(t, "Makefile"), `db-up: ## Start a PostgreSQL (\d+)`),
		"docs/testing.md db-up":  major("docs/testing.md", repoFile(t, "docs/testing.md"), "`make db-up` starts PostgreSQL (\\d+)"),
		"pgtest's documentation": major("pgtest.go", repoFile(t, "internal/testkit/pgtest/pgtest.go"), `one PostgreSQL (\d+)`),
	} {
		if got != want {
			t.Errorf("%s says PostgreSQL %s; the tests' server (DESIGN.md, .ci/run) is %s", what, got, want)
		}
	}
}

// The quick start's conflict line says something true when the lease it
// meets has ended and only its lock-delay keeps the key: "busy: worker-9
// holds billing/invoice-run until T" named a holder that no longer held
// it and a time already past.
func TestLibraryQuickStartDuringALockDelay(t *testing.T) {
	t.Parallel()
	exe := buildProgram(t, "quickstartdelay", codeBlock(t, "docs/library.md", "go", "sqlite.OpenDB("))
	dir := t.TempDir()
	c := leasectl{dir: dir, dsn: "sqlite:" + filepath.Join(dir, "leases.db")}
	c.runJSON(t, 0, "acquire", "billing/invoice-run", "--owner", "worker-9", "--ttl", "1m", "--lock-delay", "1h")
	c.runJSON(t, 0, "revoke", "billing/invoice-run", "--reason", "doc test")
	cmd := exec.Command(exe)
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("the quick start failed: %v\n%s", err, out)
	}
	t.Logf("the quick start printed %q", out)
	if s := string(out); !strings.Contains(s, "lock-delay") || strings.Contains(s, "worker-9 holds") {
		t.Errorf("the quick start, meeting a revoked lease's lock-delay, printed %q; want the lock-delay named, not worker-9 as holder", s)
	}
}
