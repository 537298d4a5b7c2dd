package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/leasestore/leasestore/internal/testkit/etcdcluster"
	"github.com/leasestore/leasestore/internal/testkit/pgtest"
	"github.com/leasestore/leasestore/kvstore/etcd"
	"github.com/leasestore/leasestore/migrations"
	"github.com/leasestore/leasestore/protocol"
	"github.com/leasestore/leasestore/sqlstore/postgres"
	"github.com/leasestore/leasestore/sqlstore/sqlite"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(etcdcluster.WithShared(m), pgtest.LeakOptions()...)
}

const (
	fleetTTL = 2 * time.Second
	// settle bounds the waits for the fleet; generous, for a loaded machine.
	settle = 60 * time.Second
)

// build compiles the scanner once per test.
func build(t *testing.T) string {
	t.Helper()
	exe := filepath.Join(t.TempDir(), "scanner")
	if out, err := exec.Command("go", "build", "-o", exe, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return exe
}

// proc is one scanner process.
type proc struct {
	name string
	cmd  *exec.Cmd
	out  chan string // stdout lines
	done chan error
}

func startScanner(t *testing.T, exe, dsn, name string) *proc {
	t.Helper()
	cmd := exec.Command(exe, "-dsn", dsn, "-identity", name, "-targets", "30", "-ttl", fleetTTL.String())
	cmd.Stderr = &testLog{t: t, prefix: name}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &proc{name: name, cmd: cmd, out: make(chan string, 1000), done: make(chan error, 1)}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			select {
			case p.out <- sc.Text():
			default:
			}
		}
		p.done <- cmd.Wait()
	}()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

// stop sends SIGTERM and waits for a clean exit.
func (p *proc) stop(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-p.done:
		if err != nil {
			t.Errorf("%s after SIGTERM: %v", p.name, err)
		}
	case <-time.After(settle):
		t.Fatalf("%s did not exit after SIGTERM", p.name)
	}
}

type testLog struct {
	t      *testing.T
	prefix string
	mu     sync.Mutex
}

func (l *testLog) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.t.Logf("%s: %s", l.prefix, strings.TrimSpace(string(b)))
	return len(b), nil
}

// holders returns the owners of the live range leases, counted.
func holders(t *testing.T, store protocol.Store, ns string) map[string]int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := store.List(ctx, protocol.ListRequest{Namespace: ns, Limit: protocol.MaxListLimit})
	if err != nil {
		t.Fatalf("list %s: %v", ns, err)
	}
	m := map[string]int{}
	for _, l := range res.Leases {
		m[l.Owner]++
	}
	return m
}

func waitHolders(t *testing.T, store protocol.Store, what string, want map[string]int) {
	t.Helper()
	deadline := time.Now().Add(settle)
	for {
		got := holders(t, store, "scanner")
		if fmt.Sprint(got) == fmt.Sprint(want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: the store has %v, want %v", what, got, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// fleet runs three scanner processes on one store: they split 30 ranges
// 10/10/10; SIGKILL one and the other two take its ranges (15/15) once
// its leases ran out; SIGTERM the two and no lease is left.
func fleet(t *testing.T, exe, dsn string, store protocol.Store) {
	a, b, c := startScanner(t, exe, dsn, "a"), startScanner(t, exe, dsn, "b"), startScanner(t, exe, dsn, "c")
	waitHolders(t, store, "three scanners", map[string]int{"a": 10, "b": 10, "c": 10})
	if err := c.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	<-c.done
	waitHolders(t, store, "after c was killed", map[string]int{"a": 15, "b": 15})
	t.Logf("a and b held c's ranges %v after c was killed (TTL %v)", time.Since(killed).Round(time.Millisecond), fleetTTL)
	a.stop(t)
	b.stop(t)
	for _, ns := range []string{"scanner", "scanner.workers"} {
		if got := holders(t, store, ns); len(got) != 0 {
			t.Errorf("after shutdown %s still has live leases: %v", ns, got)
		}
	}
	var lines []string
	for len(a.out) > 0 {
		lines = append(lines, <-a.out)
	}
	if len(lines) == 0 || !strings.Contains(lines[0], "a starts: 30 ranges in scanner") ||
		!strings.Contains(strings.Join(lines, "\n"), "a scanning 10.0.") || lines[len(lines)-1] != "a stopped" {
		t.Errorf("a's output:\n%s", strings.Join(lines, "\n"))
	}
}

func TestFleetSQLite(t *testing.T) {
	t.Parallel()
	exe := build(t)
	path := filepath.Join(t.TempDir(), "scans.db")
	// The scanners migrate the file too; migrating it here first lets the
	// test open it before they start.
	db, err := sqlite.OpenDB(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := migrations.Up(context.Background(), migrations.SQLite, db); err != nil {
		t.Fatal(err)
	}
	b, err := sqlite.New(context.Background(), db, nil)
	if err != nil {
		t.Fatal(err)
	}
	store := protocol.New(b, nil)
	defer store.Close(context.Background())
	fleet(t, exe, "sqlite:"+path, store)
}

func TestFleetPostgres(t *testing.T) {
	t.Parallel()
	dsn := pgtest.MigratedDSN(t)
	exe := build(t)
	b, err := postgres.Open(context.Background(), dsn, nil)
	if err != nil {
		t.Fatal(err)
	}
	store := protocol.New(b, nil)
	defer store.Close(context.Background())
	fleet(t, exe, dsn, store)
}

func TestFleetEtcd(t *testing.T) {
	t.Parallel()
	c := etcdcluster.Shared(t)
	prefix := c.Prefix(t)
	exe := build(t)
	b, err := etcd.Open(context.Background(), &etcd.Config{Endpoints: c.Endpoints(), Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	store := protocol.New(b, nil)
	defer store.Close(context.Background())
	fleet(t, exe, c.DSN(prefix), store)
}

// Bad flags are refused with exit 2 and a message, before any store is
// opened.
func TestBadFlags(t *testing.T) {
	t.Setenv("LEASESTORE_DSN", "")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{}, "-dsn: give sqlite:PATH"},
		{[]string{"-dsn", "mysql://x"}, `scheme "mysql" is none of sqlite:PATH, a postgres:// URL or etcd://`},
		{[]string{"-dsn", "sqlite:x.db", "-targets", "0"}, "-targets: 0 is outside"},
		{[]string{"-dsn", "sqlite:x.db", "-identity", ""}, "-identity: owner: must not be empty"},
		{[]string{"-dsn", "sqlite:x.db", "-ttl", "1s", "-log-level", "loud"}, "-log-level"},
		{[]string{"-dsn", "sqlite:x.db", "-ttl", "0s"}, "-ttl: 0s is outside"},
		{[]string{"-dsn", "sqlite:x.db", "extra"}, "unexpected arguments"},
	} {
		var stdout, stderr strings.Builder
		code := run(context.Background(), c.args, &stdout, &stderr)
		if code != 2 || !strings.Contains(stderr.String(), c.want) {
			t.Errorf("%q: exit %d, stderr %q; want 2 and an error saying %q", c.args, code, stderr.String(), c.want)
		}
	}
	// A refused DSN is never echoed: it may carry a password, in the URL's
	// userinfo or in a password= parameter.
	for _, dsn := range []string{
		"postgre://app:hunter2@db:5432/app",
		"postgresq://app:hunter2@db:5432/app?sslmode=disable",
		"host=db user=app password=hunter2 dbname=app",
		"password=hunter2:x@db",
		"hunter2",
	} {
		var stdout, stderr strings.Builder
		code := run(context.Background(), []string{"-dsn", dsn}, &stdout, &stderr)
		if code != 2 || !strings.Contains(stderr.String(), "-dsn:") {
			t.Errorf("-dsn %q: exit %d, stderr %q; want 2 and an error about -dsn", dsn, code, stderr.String())
		}
		if strings.Contains(stdout.String()+stderr.String(), "hunter2") {
			t.Errorf("-dsn %q: the password is in the output: stdout %q, stderr %q", dsn, stdout.String(), stderr.String())
		}
	}
	if _, err := os.Stat("x.db"); err == nil {
		t.Error("a refused command line created x.db")
	}
}
