// Package pgbouncer starts a PgBouncer in transaction pooling mode
// (pool_mode=transaction) in front of the test server of pgtest, for tests
// that run leasestore through a pooler that does not keep sessions. Each
// test's schema gets a database alias of its own, whose server connections
// use that schema (connect_query), since PgBouncer does not pass the
// options startup parameter on.
//
// PgBouncer comes from the system (Debian's pgbouncer package; .ci/run
// installs it). Without it a test is skipped, or fails when CI is set. A
// Bouncer runs as nobody when the tests run as root (PgBouncer refuses
// root), logs to the test's log when the test fails, and is stopped in
// t.Cleanup. For tests only.
package pgbouncer

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leasestore/leasestore/internal/testkit/pgtest"
)

// Bouncer is a running PgBouncer. Its methods are safe for concurrent use.
type Bouncer struct {
	port   int
	conf   string   // the configuration file
	server *url.URL // the test server
	cmd    *exec.Cmd
	log    *strings.Builder

	mu      sync.Mutex
	aliases []string // [databases] lines
}

// binary returns PgBouncer's path, or skips t (fails it when CI is set).
func binary(t testing.TB) string {
	t.Helper()
	for _, p := range []string{"pgbouncer", "/usr/sbin/pgbouncer"} {
		if path, err := exec.LookPath(p); err == nil {
			return path
		}
	}
	msg := "pgbouncer: not installed (apt-get install pgbouncer)"
	if os.Getenv("CI") != "" {
		t.Fatal(msg + "; CI is set, so a missing PgBouncer is a failure")
	}
	t.Skip(msg)
	return ""
}

// Start starts a PgBouncer on a free loopback port in transaction pooling
// mode, trusting every client, in front of pgtest's server, and stops it
// when t ends. Server connections close after two idle seconds, and at most
// 40 are open at once, so that many aliases do not exhaust the server.
func Start(t testing.TB) *Bouncer {
	t.Helper()
	bin := binary(t)
	server, err := url.Parse(pgtest.ServerDSN(t))
	if err != nil {
		t.Fatalf("pgbouncer: the test server's DSN is not a URL: %v", err)
	}
	dir := t.TempDir()
	for _, d := range []string{filepath.Dir(dir), dir} { // readable by nobody (t.TempDir makes them 0700)
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	b := &Bouncer{port: freePort(t), conf: filepath.Join(dir, "pgbouncer.ini"), server: server, log: &strings.Builder{}}
	user := server.User.Username()
	if err := os.WriteFile(filepath.Join(dir, "users.txt"), []byte(fmt.Sprintf("%q \"\"\n", user)), 0o644); err != nil {
		t.Fatal(err)
	}
	b.writeConfig(t)
	b.cmd = exec.Command(bin, b.conf)
	b.cmd.Stdout, b.cmd.Stderr = b.log, b.log
	if os.Geteuid() == 0 {
		runAsNobody(b.cmd)
	}
	if err := b.cmd.Start(); err != nil {
		t.Fatalf("pgbouncer: %v", err)
	}
	exited := make(chan struct{})
	go func() { _ = b.cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = b.cmd.Process.Signal(syscall.SIGINT) // a safe shutdown: close every connection now
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = b.cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("pgbouncer's log:\n%s", b.log)
		}
	})
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", b.addr(), time.Second)
		if err == nil {
			_ = c.Close()
			return b
		}
		select {
		case <-exited:
			t.Fatalf("pgbouncer exited: %s", b.log)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("pgbouncer does not accept connections on %s: %v\n%s", b.addr(), err, b.log)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (b *Bouncer) addr() string { return fmt.Sprintf("127.0.0.1:%d", b.port) }

// freePort returns a loopback port that was free a moment ago.
func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// writeConfig writes the configuration with the aliases so far; b.mu is
// held or b is not shared yet.
func (b *Bouncer) writeConfig(t testing.TB) {
	t.Helper()
	var conf strings.Builder
	conf.WriteString("[databases]\n")
	for _, a := range b.aliases {
		conf.WriteString(a + "\n")
	}
	fmt.Fprintf(&conf, `[pgbouncer]
listen_addr = 127.0.0.1
listen_port = %d
unix_socket_dir =
auth_type = trust
auth_file = %s
pool_mode = transaction
max_client_conn = 2000
default_pool_size = 4
max_user_connections = 40
server_idle_timeout = 2
server_login_retry = 1
ignore_startup_parameters = extra_float_digits
logfile =
pidfile =
`, b.port, filepath.Join(filepath.Dir(b.conf), "users.txt"))
	if err := os.WriteFile(b.conf, []byte(conf.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

// DSN returns a DSN through the bouncer to the schema of dsn (a DSN of
// pgtest.DSN or MigratedDSN, possibly of another role, as pgtest.RoleDSN
// makes): it adds a database alias whose server connections log in as
// dsn's user and set dsn's search_path, reloads the bouncer, and waits
// until the alias answers.
func (b *Bouncer) DSN(t testing.TB, dsn string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("pgbouncer: %v", err)
	}
	var schema, user string
	err = conn.QueryRow(ctx, "SELECT current_schema(), current_user").Scan(&schema, &user)
	_ = conn.Close(ctx)
	if err != nil {
		t.Fatalf("pgbouncer: %v", err)
	}
	alias := "lsb_" + strings.TrimPrefix(schema, "lstest_") + "_" + strings.TrimPrefix(user, "lstest_role_")
	host, port, _ := net.SplitHostPort(b.server.Host)
	line := fmt.Sprintf("%s = host=%s port=%s dbname=%s user=%s connect_query='SET search_path TO %s'",
		alias, host, port, strings.TrimPrefix(b.server.Path, "/"), user, schema)
	b.mu.Lock()
	b.aliases = append(b.aliases, line)
	b.writeConfig(t)
	err = b.cmd.Process.Signal(syscall.SIGHUP) // reload
	b.mu.Unlock()
	if err != nil {
		t.Fatalf("pgbouncer: reload: %v", err)
	}
	out := fmt.Sprintf("postgres://%s@%s/%s?sslmode=disable", url.User(b.server.User.Username()).String(), b.addr(), alias)
	for {
		c, err := pgx.Connect(ctx, out)
		if err == nil {
			var got string
			err = c.QueryRow(ctx, "SELECT current_schema()").Scan(&got)
			_ = c.Close(ctx)
			if err == nil && got == schema {
				return out
			}
		}
		if ctx.Err() != nil {
			t.Fatalf("pgbouncer: alias %s does not answer: %v\n%s", alias, err, b.log)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
