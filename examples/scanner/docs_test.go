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

	"github.com/leasestore/leasestore/protocol"
	"github.com/leasestore/leasestore/sqlstore/sqlite"
)

// The scheduler program of docs/scheduler.md compiles (through an overlay: nothing is
// written into the repository), takes every target when it runs alone, and
// releases everything on Ctrl-C.
func TestDocsSchedulerProgram(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile(filepath.Join("..", "..", "docs", "scheduler.md"))
	if err != nil {
		t.Fatal(err)
	}
	var src string
	for _, m := range regexp.MustCompile("(?s)```go\n(.*?)```\n").FindAllStringSubmatch(string(data), -1) {
		if strings.Contains(m[1], "scheduler.New(") {
			src = m[1]
		}
	}
	if src == "" || !strings.HasPrefix(src, "package main\n") {
		t.Fatalf("docs/scheduler.md has no whole program calling scheduler.New")
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
	overlay, _ := json.Marshal(map[string]any{"Replace": map[string]string{filepath.Join(wd, "_docs", "scheduler", "main.go"): file}})
	if err := os.WriteFile(filepath.Join(dir, "overlay.json"), overlay, 0o644); err != nil {
		t.Fatal(err)
	}
	exe := filepath.Join(dir, "snippet")
	if out, err := exec.Command("go", "build", "-overlay="+filepath.Join(dir, "overlay.json"), "-o", exe, "./_docs/scheduler").CombinedOutput(); err != nil {
		t.Fatalf("the scheduler program of docs/scheduler.md does not compile: %v\n%s", err, out)
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, exe)
	cmd.Dir = dir
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(stderr)
	scanning := 0
	for scanning < 4 && sc.Scan() {
		t.Logf("program: %s", sc.Text())
		if strings.Contains(sc.Text(), "scanning 10.0.") {
			scanning++
		}
	}
	if scanning < 4 {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatalf("the program scanned %d of its 4 targets", scanning)
	}
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	stopped := 0
	for sc.Scan() {
		t.Logf("program: %s", sc.Text())
		if strings.Contains(sc.Text(), "stopped scanning 10.0.") && strings.Contains(sc.Text(), "scheduler: stopped") {
			stopped++
		}
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("the program after Ctrl-C: %v", err)
	}
	if stopped != 4 {
		t.Errorf("%d handlers said they stopped for the shutdown, want 4", stopped)
	}

	b, err := sqlite.Open(context.Background(), filepath.Join(dir, "scans.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	store := protocol.New(b, nil)
	defer store.Close(context.Background())
	for _, ns := range []string{"scans", "scans.workers"} {
		res, err := store.List(context.Background(), protocol.ListRequest{Namespace: ns})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Leases) != 0 {
			t.Errorf("after Ctrl-C %s holds %d live leases", ns, len(res.Leases))
		}
	}
}
