package main

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leasestore/leasestore/internal/testkit/pgtest"
)

// TestInterruptedReadSaysInterrupted: Ctrl-C (SIGINT) on get, list or
// describe while the store has not answered (a served store whose
// PostgreSQL table another session keeps locked, so the server's handler
// waits) ends the read as it ends audit and health: status interrupted,
// exit 130, saying nowhere that it was a timeout. A read has no outcome
// to learn by a retry with its request id, so the timeout a change prints
// (acquire, renew, release, revoke) says nothing true of it. They printed
// status timeout and exited 130.
func TestInterruptedReadSaysInterrupted(t *testing.T) {
	t.Parallel()
	dsn := pgtest.MigratedDSN(t)
	ns := pgtest.Namespace()
	writer := leasectl{dir: t.TempDir(), dsn: dsn}
	result(t, writer.runJSON(t, 0, "acquire", ns+"/k", "--owner", "o", "--ttl", "10m"), "acquired")
	dir := t.TempDir()
	s := startServe(t, dir, dsn, nil)

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	lock, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close(context.Background())
	tx, err := lock.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(context.Background()) }()
	if _, err := tx.Exec(ctx, "LOCK TABLE leasestore_leases IN ACCESS EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}
	watcher, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer watcher.Close(context.Background())
	// waiting counts the server's statements of a command (told by a
	// fragment of their text) that wait for the lock.
	waiting := func(fragment string) int {
		t.Helper()
		var n int
		if err := watcher.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE wait_event_type = 'Lock' AND datname = current_database() AND pid <> pg_backend_pid()
			AND strpos(query, $1) > 0`, fragment).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	until := func(what string, ok func() bool) {
		t.Helper()
		for deadline := time.Now().Add(time.Minute); !ok(); time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within a minute", what)
			}
		}
	}

	c := leasectl{dir: t.TempDir(), dsn: s.url}
	for _, read := range []struct {
		args     []string
		fragment string // of the statement the served store waits in
	}{
		{[]string{"get", ns + "/k"}, "LEFT JOIN leasestore_leases l ON l.namespace"},
		{[]string{"list", "-n", ns}, "starts_with(l.name"},
		{[]string{"describe", ns + "/k"}, "LEFT JOIN leasestore_leases l ON l.namespace"},
	} {
		for _, output := range []string{"json", "table"} {
			args := append(append([]string{}, read.args...), "-o", output, "--timeout", "1m")
			what := "leasectl " + strings.Join(args, " ")
			until(what+": the server's earlier statements to end", func() bool { return waiting(read.fragment) == 0 })
			cmd := c.command(ctx, args...)
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			until(what+": the served store to wait for the lock", func() bool { return waiting(read.fragment) > 0 })
			if err := cmd.Process.Signal(os.Interrupt); err != nil {
				t.Fatal(err)
			}
			r := finish(t, cmd, args, cmd.Wait())
			if r.code != 130 {
				t.Errorf("%s interrupted while the store had not answered: exit %d, want 130\n%s", what, r.code, r)
				continue
			}
			if output == "json" {
				if m := r.obj(t); m["status"] != "interrupted" || strings.Contains(m["message"].(string), "timeout") {
					t.Errorf("%s interrupted while the store had not answered: status %v, message %q; want status interrupted, "+
						"as audit and health say, and no timeout\n%s", what, m["status"], m["message"], r)
				}
				continue
			}
			if !strings.Contains(r.stderr, "interrupted") || strings.Contains(r.stdout+r.stderr, "timeout") {
				t.Errorf("%s interrupted while the store had not answered: want it to say interrupted, as audit and health do, "+
					"and not timeout\n%s", what, r)
			}
		}
	}
}
