package main

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Ctrl-C on a running command exits 130, as a shell reports SIGINT, says it
// was interrupted (not "timeout: context canceled"), and the demo's
// temporary store is removed.
func TestInterruptExits130(t *testing.T) {
	t.Parallel()
	tmp := t.TempDir()
	c := leasectl{dir: t.TempDir()}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := c.command(ctx, "demo", "--ttl", "2s")
	cmd.Env = append(cmd.Env, "TMPDIR="+tmp)
	cmd.Stdout = nil
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(out)
	var stdout strings.Builder
	// The demo's first step is under way once its third line is out.
	for i := 0; i < 3 && sc.Scan(); i++ {
		stdout.WriteString(sc.Text() + "\n")
	}
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	for sc.Scan() {
		stdout.WriteString(sc.Text() + "\n")
	}
	cmd.Stdout = &bytes.Buffer{}
	r := finish(t, cmd, []string{"demo"}, cmd.Wait())
	r.stdout = stdout.String()
	if r.code != 130 {
		t.Fatalf("exit %d after Ctrl-C, want 130\n%s", r.code, r)
	}
	if !strings.Contains(r.stderr, "interrupted") || strings.Contains(r.stderr, "timeout") {
		t.Errorf("stderr after Ctrl-C should say interrupted, not timeout:\n%s", r.stderr)
	}
	if entries, _ := os.ReadDir(tmp); len(entries) != 0 {
		t.Errorf("the interrupted demo left %v in %s", entries, tmp)
	}
}

// Ctrl-C ends audit --follow with exit 0, as documented: following until
// interrupted is its job.
func TestInterruptFollowStillExits0(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	c := leasectl{dir: dir, dsn: "sqlite:" + filepath.Join(dir, "f.db")}
	if r := c.run(t, "migrate", "up"); r.code != 0 {
		t.Fatalf("migrate up\n%s", r)
	}
	if r := c.run(t, "acquire", "k", "--owner", "o"); r.code != 0 {
		t.Fatalf("acquire\n%s", r)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := c.command(ctx, "audit", "--follow", "--since", "1h", "--interval", "20ms")
	cmd.Stdout = nil
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Following once the first record is out (a signal sent before the
	// process set up its handler would kill it, however loaded the
	// machine).
	sc := bufio.NewScanner(out)
	if !sc.Scan() {
		t.Fatalf("audit --follow printed nothing: %v", sc.Err())
	}
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	for sc.Scan() {
	}
	cmd.Stdout = &bytes.Buffer{}
	if r := finish(t, cmd, []string{"audit", "--follow"}, cmd.Wait()); r.code != 0 {
		t.Fatalf("audit --follow after Ctrl-C: exit %d, want 0\n%s", r.code, r)
	}
}

// demo | head: once stdout is closed the demo stops, removes its temporary
// store, and exits 141 as a process ended by SIGPIPE would, saying nothing.
func TestClosedStdoutEndsTheDemoCleanly(t *testing.T) {
	t.Parallel()
	tmp := t.TempDir()
	c := leasectl{dir: t.TempDir()}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := c.command(ctx, "demo", "--ttl", "300ms")
	cmd.Env = append(cmd.Env, "TMPDIR="+tmp)
	cmd.Stdout = nil
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	first := make([]byte, 64)
	if _, err := out.Read(first); err != nil {
		t.Fatal(err)
	}
	_ = out.Close() // head has read its lines
	cmd.Stdout = &bytes.Buffer{}
	r := finish(t, cmd, []string{"demo"}, cmd.Wait())
	if r.code != 141 {
		t.Errorf("demo with its stdout closed: exit %d, want 141\n%s", r.code, r)
	}
	if strings.Contains(r.stderr, "leasectl:") {
		t.Errorf("demo with its stdout closed complained:\n%s", r.stderr)
	}
	if entries, _ := os.ReadDir(tmp); len(entries) != 0 {
		t.Errorf("demo left %v in %s", entries, tmp)
	}
}
