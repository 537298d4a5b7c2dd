package postgres_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leasestore/leasestore/contract/lincheck"
	"github.com/leasestore/leasestore/internal/testkit/pgtest"
	"github.com/leasestore/leasestore/sqlstore/postgres"
)

// chaosEnv enables the chaos tests (`make chaos`), which are too long and
// too heavy (a PostgreSQL cluster of their own) for every `go test`.
const chaosEnv = "LEASESTORE_CHAOS"

// cluster is a throwaway PostgreSQL cluster in a temporary directory, made
// with initdb and run with pg_ctl from `pg_config --bindir`, as the OS user
// postgres when the test runs as root (the server refuses to run as root).
// It listens on 127.0.0.1 on a free port, with trust authentication, and
// is stopped and removed when the test ends. It never touches another
// cluster.
type cluster struct {
	bin, dir, data, port string
	opts                 string // the server's command-line options
	asUser               []string
}

func newCluster(t *testing.T, settings ...string) *cluster {
	t.Helper()
	out, err := exec.Command("pg_config", "--bindir").Output()
	if err != nil {
		t.Fatalf("pg_config --bindir: %v (install PostgreSQL's server package)", err)
	}
	c := &cluster{bin: strings.TrimSpace(string(out))}
	if os.Geteuid() == 0 {
		if _, err := user.Lookup("postgres"); err != nil {
			t.Fatalf("running as root, and there is no OS user postgres to run the server as: %v", err)
		}
		c.asUser = []string{"runuser", "-u", "postgres", "--"}
	}
	// Not t.TempDir: the postgres user must be able to reach it.
	if c.dir, err = os.MkdirTemp("", "leasestore-chaos-"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(c.dir) })
	if c.asUser != nil {
		if out, err := exec.Command("chown", "postgres:", c.dir).CombinedOutput(); err != nil {
			t.Fatalf("chown: %v: %s", err, out)
		}
	}
	c.data = filepath.Join(c.dir, "data")
	c.port = freePort(t)
	c.opts = fmt.Sprintf("-p %s -k %s -c listen_addresses=127.0.0.1 -c fsync=off", c.port, c.dir)
	for _, s := range settings {
		c.opts += " -c " + s
	}
	c.run(t, "initdb", "-D", c.data, "-U", "leasestore", "-A", "trust", "-E", "UTF8", "--no-sync")
	c.start(t)
	t.Cleanup(func() {
		if _, err := os.Stat(filepath.Join(c.data, "postmaster.pid")); err != nil {
			return // the test stopped it
		}
		cmd := c.command("pg_ctl", "-D", c.data, "-m", "immediate", "-w", "stop")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Logf("stopping the throwaway cluster: %v: %s", err, out)
		}
	})
	return c
}

// freePort returns a TCP port of 127.0.0.1 that nothing listens on now.
func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return fmt.Sprint(l.Addr().(*net.TCPAddr).Port)
}

func (c *cluster) command(name string, args ...string) *exec.Cmd {
	argv := append(append(append([]string{}, c.asUser...), filepath.Join(c.bin, name)), args...)
	return exec.Command(argv[0], argv[1:]...)
}

// exec runs a server program; its error carries the program's output and
// the server's log.
func (c *cluster) exec(name string, args ...string) error {
	if out, err := c.command(name, args...).CombinedOutput(); err != nil {
		log, _ := os.ReadFile(filepath.Join(c.dir, "server.log"))
		return fmt.Errorf("%s %s: %v\n%s\nserver log:\n%s", name, strings.Join(args, " "), err, out, log)
	}
	return nil
}

func (c *cluster) run(t *testing.T, name string, args ...string) {
	t.Helper()
	if err := c.exec(name, args...); err != nil {
		t.Fatal(err)
	}
}

func (c *cluster) startServer() error {
	return c.exec("pg_ctl", "-D", c.data, "-l", filepath.Join(c.dir, "server.log"), "-o", c.opts, "-w", "-t", "60", "start")
}

func (c *cluster) start(t *testing.T) {
	t.Helper()
	if err := c.startServer(); err != nil {
		t.Fatal(err)
	}
}

// crash stops the server as a crash would (pg_ctl -m immediate: no
// checkpoint, every backend killed at once; the next start recovers from
// the WAL), waits down, and starts it again.
func (c *cluster) crash(down time.Duration) error {
	if err := c.exec("pg_ctl", "-D", c.data, "-m", "immediate", "-w", "stop"); err != nil {
		return err
	}
	time.Sleep(down)
	return c.startServer()
}

// dsn returns the DSN of the cluster's database postgres.
func (c *cluster) dsn() string {
	return "postgres://leasestore@127.0.0.1:" + c.port + "/postgres?sslmode=disable"
}

// migratedSchema creates the schema lincheck, migrates it and returns a DSN
// that uses it.
func (c *cluster) migratedSchema(t *testing.T) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, c.dsn())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "CREATE SCHEMA lincheck"); err != nil {
		t.Fatal(err)
	}
	dsn, err := pgtest.WithSearchPath(c.dsn(), "lincheck")
	if err != nil {
		t.Fatal(err)
	}
	if err := pgtest.Migrate(ctx, dsn); err != nil {
		t.Fatal(err)
	}
	return dsn
}

// setSequenceBack sets the fencing sequence of dsn's schema back to 1.
func setSequenceBack(dsn string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	_, err = conn.Exec(ctx, "SELECT setval('leasestore_fencing_seq', 1)")
	return err
}

// TestChaosServerCrashes (LEASESTORE_CHAOS=1, `make chaos`) runs the
// lincheck workload from three pools against a throwaway cluster while the
// server is crashed (pg_ctl -m immediate) and started again every few
// seconds, and connections are terminated now and then. Clients retry for
// up to a minute with the same request id, so most operations caught by a
// crash end with the truth (a replay when they had committed). The history
// must be linearizable: no committed change lost, no token reissued.
//
// The second case runs the same with server settings a DBA may choose that
// break naive backends: asynchronous commit (a crash loses the last
// commits, unless the backend pins synchronous_commit) and serializable as
// the default isolation. In the third, the server comes back from each
// crash with its fencing sequence set back to 1, as a switchover to a
// logical replica (which does not carry sequence state) would leave it
// under a running fleet: tokens must still increase per key (DESIGN.md).
// The fourth runs the defaults with two pools of six clients that do not
// pause between operations, so that most operations go to the server in
// batches (coalescing; each backend sends one round trip at a time), and
// checks that batches formed.
func TestChaosServerCrashes(t *testing.T) {
	if os.Getenv(chaosEnv) == "" {
		t.Skip("a long test with a PostgreSQL cluster of its own: set " + chaosEnv + "=1 (make chaos)")
	}
	for _, c := range []struct {
		name           string
		settings       []string
		sequenceBehind bool
		coalesced      bool
	}{
		{"defaults", nil, false, false},
		{"hostile settings", []string{"synchronous_commit=off", "default_transaction_isolation=serializable"}, false, false},
		{"sequence left behind", nil, true, false},
		{"coalesced", nil, false, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			const (
				runFor     = 30 * time.Second
				crashEvery = 5 * time.Second // on average
			)
			cl := newCluster(t, c.settings...)
			r := lincheckRun{dsn: cl.migratedSchema(t), app: "lincheck-chaos", pools: 3, clients: 2,
				retryFor: time.Minute, retryDelay: 50 * time.Millisecond, loseAnswers: 0.01,
				think:    10 * time.Millisecond, // a history that porcupine searches in seconds
				backends: new([]*postgres.Backend)}
			if c.coalesced {
				r.pools, r.clients, r.think, r.ops = 2, 6, 0, 4000
			}
			rts := r.open(t)
			stopTerm := terminator(t, cl.dsn(), r.app, 500*time.Millisecond)
			ctx, cancel := context.WithTimeout(context.Background(), runFor)
			defer cancel()

			crashes := 0
			var wg sync.WaitGroup
			wg.Go(func() {
				for {
					select {
					case <-ctx.Done():
						return
					case <-time.After(crashEvery/2 + rand.N(crashEvery)):
					}
					if err := cl.crash(rand.N(time.Second)); err != nil {
						t.Error(err)
						return
					}
					if c.sequenceBehind {
						if err := setSequenceBack(r.dsn); err != nil {
							t.Error(err)
							return
						}
					}
					crashes++
				}
			})
			began := time.Now()
			h := r.run(t, ctx, rts)
			wg.Wait()
			killed := stopTerm()

			res, err := lincheck.Check(h, &lincheck.CheckOptions{Name: t.Name(), Timeout: 5 * time.Minute})
			batches, batched := r.batches()
			t.Logf("history: %v; %d crashes, %d server processes terminated, in %v; %d operations in %d batches",
				res, crashes, killed, time.Since(began).Round(time.Millisecond), batched, batches)
			if err != nil {
				t.Fatal(err)
			}
			r.checkAudit(t, h)
			if c.coalesced && batches < 50 {
				t.Fatalf("only %d batches formed: the run did not test coalescing", batches)
			}
			if crashes < 3 {
				t.Errorf("only %d crashes", crashes)
			}
			if res.Operations < 2000 {
				t.Errorf("only %d operations", res.Operations)
			}
		})
	}
}
