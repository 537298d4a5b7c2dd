package main

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/leasestore/leasestore/internal/testkit/pgtest"
)

// readmeGo returns the ```go blocks of the repository's README.md.
func readmeGo(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	var blocks []string
	for _, m := range regexp.MustCompile("(?s)```go\n(.*?)```\n").FindAllStringSubmatch(string(data), -1) {
		blocks = append(blocks, m[1])
	}
	if len(blocks) < 2 {
		t.Fatalf("README.md has %d go blocks, want the SQLite and PostgreSQL programs", len(blocks))
	}
	return blocks
}

// buildSnippet compiles one README block as a main package of this module
// (through an overlay: nothing is written into the repository) and returns
// the binary's path.
func buildSnippet(t *testing.T, i int, src string) string {
	t.Helper()
	if !strings.HasPrefix(src, "package main\n") {
		t.Fatalf("README go block %d is not a whole program (package main, imports):\n%s", i, src)
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
	pkg := filepath.Join("_readme", "snippet"+string(rune('0'+i)))
	overlay, _ := json.Marshal(map[string]any{"Replace": map[string]string{filepath.Join(wd, pkg, "main.go"): file}})
	if err := os.WriteFile(filepath.Join(dir, "overlay.json"), overlay, 0o644); err != nil {
		t.Fatal(err)
	}
	exe := filepath.Join(dir, "snippet")
	out, err := exec.Command("go", "build", "-overlay="+filepath.Join(dir, "overlay.json"), "-o", exe, "./"+pkg).CombinedOutput()
	if err != nil {
		t.Fatalf("README go block %d does not compile: %v\n%s", i, err, out)
	}
	return exe
}

// The README's library programs compile, and do what they say when run:
// the SQLite quick start runs to its end; the PostgreSQL one holds its
// lease until Ctrl-C and then releases it.
func TestReadmeSnippets(t *testing.T) {
	t.Parallel()
	blocks := readmeGo(t)
	exes := make([]string, len(blocks))
	for i, src := range blocks {
		exes[i] = buildSnippet(t, i, src)
	}

	t.Run("sqlite", func(t *testing.T) {
		dir := t.TempDir()
		cmd := exec.Command(exes[0])
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("the SQLite quick start failed: %v\n%s", err, out)
		}
		c := leasectl{dir: dir, dsn: "sqlite:" + filepath.Join(dir, "leases.db")}
		r := c.runJSON(t, 0, "audit", "-n", "scanner", "--key", "10.0.0.0/24")
		if n := len(r["records"].([]any)); n != 3 {
			t.Fatalf("the quick start left %d audit records, want acquire, renew, release: %v", n, r)
		}
	})

	t.Run("postgres", func(t *testing.T) {
		dsn := pgtest.DSN(t)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, exes[1])
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
	})
}

// The README's block of leasectl run, acquire --wait and watch runs as
// written (bash, leasectl on PATH) on a fresh SQLite store: the two runs
// take turns with increasing tokens, the deploy step takes and gives back
// its lease, and watch prints the four changes of the report's key.
func TestReadmeWaitRunWatchScript(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)```bash\n(# leasectl run, acquire --wait and watch\n.*?)```\n").FindStringSubmatch(string(data))
	if m == nil {
		t.Fatal("README.md has no bash block starting with \"# leasectl run, acquire --wait and watch\"")
	}
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-e", "-c", m[1])
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(bin)+string(os.PathListSeparator)+os.Getenv("PATH"),
		"LEASESTORE_DSN=sqlite:"+filepath.Join(dir, "leases.db"), "NO_COLOR=1")
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("the README block failed: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	out := stdout.String()
	if !strings.Contains(out, "report with token 1\n") || !strings.Contains(out, "report with token 2\n") ||
		!strings.Contains(out, "deploying with fencing token 3\n") {
		t.Fatalf("the README block printed:\n%s\nwant the two reports (tokens 1, 2) and the deploy (token 3)\nstderr:\n%s", out, stderr.String())
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
