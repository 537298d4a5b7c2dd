// Command scanner is an example of the scheduler package: a fleet of
// scanner processes sharing a set of network ranges through leases. Start
// as many as you like against one store; each claims its fair share,
// "scans" its ranges (prints a line per range and pass, with the range's
// fencing token, as a real scanner would send it with every result it
// stores), takes over the ranges of a scanner that died once their leases
// run out, and hands ranges over when another scanner joins. Ctrl-C or
// SIGTERM stops it: every range is released at once.
//
//	go run ./examples/scanner -dsn sqlite:/tmp/scans.db -targets 12 &
//	go run ./examples/scanner -dsn sqlite:/tmp/scans.db -targets 12 &
//	go run ./examples/scanner -dsn 'postgres://app@db:5432/app' -targets 12
//	go run ./examples/scanner -dsn 'etcd://127.0.0.1:2379/scans' -targets 12
//
// A SQLite file is created and migrated on first use; a PostgreSQL schema
// must be migrated first (leasectl migrate up).
package main

import (
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/leasestore/leasestore/durations"
	"github.com/leasestore/leasestore/kvstore/etcd"
	"github.com/leasestore/leasestore/migrations"
	"github.com/leasestore/leasestore/protocol"
	"github.com/leasestore/leasestore/scheduler"
	"github.com/leasestore/leasestore/sqlstore/postgres"
	"github.com/leasestore/leasestore/sqlstore/sqlite"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// config is the command line.
type config struct {
	dsn       string
	identity  string
	namespace string
	targets   int
	ttl       time.Duration
	scanEvery time.Duration
	logLevel  string
}

func parse(args []string, stderr io.Writer) (config, error) {
	host, _ := os.Hostname()
	c := config{}
	fs := flag.NewFlagSet("scanner", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&c.dsn, "dsn", os.Getenv("LEASESTORE_DSN"), "store: sqlite:PATH, postgres://... or etcd://HOST:PORT[,...]/PREFIX (default $LEASESTORE_DSN)")
	fs.StringVar(&c.identity, "identity", fmt.Sprintf("%s-%d", host, os.Getpid()), "this scanner's name, unique in the fleet")
	fs.StringVar(&c.namespace, "namespace", "scanner", "namespace of the ranges' leases (the workers' is NAMESPACE.workers)")
	fs.IntVar(&c.targets, "targets", 16, "number of /24 ranges to share: 10.0.0.0/24, 10.0.1.0/24, ...")
	c.ttl, c.scanEvery = 15*time.Second, time.Second
	fs.Func("ttl", "lease TTL (90s, 15m, 1h30m, 2d): a dead scanner's ranges are taken over about this long after it died (default 15s)", durationFlag(&c.ttl))
	fs.Func("scan-every", "pause between two passes over a range, as -ttl (default 1s)", durationFlag(&c.scanEvery))
	fs.StringVar(&c.logLevel, "log-level", "warn", "debug, info, warn or error (logs go to stderr)")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	switch {
	case fs.NArg() > 0:
		return c, fmt.Errorf("unexpected arguments %q", fs.Args())
	case c.dsn == "":
		return c, errors.New("-dsn: give sqlite:PATH, a postgres:// URL or etcd://HOST:PORT[,HOST:PORT...]/PREFIX (or set LEASESTORE_DSN)")
	case !strings.HasPrefix(c.dsn, "sqlite:") && !strings.HasPrefix(c.dsn, "postgres://") && !strings.HasPrefix(c.dsn, "postgresql://") &&
		!etcd.IsDSN(c.dsn):
		return c, badDSN(c.dsn)
	case c.targets < 1 || c.targets > 1<<16:
		return c, fmt.Errorf("-targets: %d is outside [1, 65536]", c.targets)
	case c.scanEvery <= 0:
		return c, fmt.Errorf("-scan-every: %s must be positive", durations.Format(c.scanEvery))
	case c.ttl < protocol.MinTTL || c.ttl > protocol.MaxTTL:
		return c, fmt.Errorf("-ttl: %s is outside [%s, %s]", durations.Format(c.ttl), durations.Format(protocol.MinTTL), durations.Format(protocol.MaxTTL))
	}
	if err := protocol.ValidateOwner(c.identity); err != nil {
		return c, fmt.Errorf("-identity: %w", err)
	}
	return c, nil
}

// durationFlag reads a flag in leasectl's duration grammar (package
// durations): 90s, 15m, 1h30m, or with days, 2d.
func durationFlag(d *time.Duration) func(string) error {
	return func(s string) error {
		v, err := durations.Parse(s)
		if err == nil {
			*d = v
		}
		return err
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c, err := parse(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "scanner:", err)
		return 2
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(c.logLevel)); err != nil {
		fmt.Fprintln(stderr, "scanner: -log-level:", err)
		return 2
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))

	store, closeStore, err := open(ctx, c.dsn)
	if err != nil {
		fmt.Fprintln(stderr, "scanner:", err)
		return 1
	}
	defer closeStore()

	ranges := make([]string, c.targets)
	for i := range ranges {
		ranges[i] = fmt.Sprintf("10.%d.%d.0/24", i>>8, i&0xff)
	}
	out := &lines{w: stdout}
	scan := func(ctx context.Context, target string, token int64) {
		out.printf("%s scanning %s with token %d\n", c.identity, target, token)
		for pass := 1; ; pass++ {
			// A real scanner probes the range here and stores what it
			// found with the token, so that the results' store refuses a
			// scanner that lost the range meanwhile.
			select {
			case <-ctx.Done():
				out.printf("%s stops %s (token %d): %v\n", c.identity, target, token, context.Cause(ctx))
				return
			case <-time.After(c.scanEvery):
				log.Debug("pass done", "target", target, "token", token, "pass", pass)
			}
		}
	}
	s, err := scheduler.New(store, c.identity, scheduler.Static(ranges...), scan, &scheduler.Config{
		Namespace: c.namespace,
		TTL:       c.ttl,
		Logger:    log,
	})
	if err != nil {
		fmt.Fprintln(stderr, "scanner:", err)
		return 2
	}
	out.printf("%s starts: %d ranges in %s\n", c.identity, c.targets, c.namespace)
	if err := s.Run(ctx); err != nil {
		fmt.Fprintln(stderr, "scanner:", err)
		return 1
	}
	out.printf("%s stopped\n", c.identity)
	return 0
}

// open opens the store a DSN names and returns it with the function that
// closes it (and what it opened).
func open(ctx context.Context, dsn string) (protocol.Store, func(), error) {
	switch {
	case strings.HasPrefix(dsn, "sqlite:"):
		db, err := sqlite.OpenDB(strings.TrimPrefix(dsn, "sqlite:"))
		if err != nil {
			return nil, nil, err
		}
		if _, err := migrations.Up(ctx, migrations.SQLite, db); err != nil {
			db.Close()
			return nil, nil, err
		}
		b, err := sqlite.New(ctx, db, nil)
		if err != nil {
			db.Close()
			return nil, nil, err
		}
		return closing(protocol.New(b, nil), db)
	case strings.HasPrefix(dsn, "postgres://"), strings.HasPrefix(dsn, "postgresql://"):
		b, err := postgres.Open(ctx, dsn, nil)
		if err != nil {
			return nil, nil, err
		}
		return closing(protocol.New(b, nil), nil)
	case etcd.IsDSN(dsn):
		cfg, err := etcd.ParseDSN(dsn)
		if err != nil {
			return nil, nil, err
		}
		b, err := etcd.Open(ctx, cfg)
		if err != nil {
			return nil, nil, err
		}
		return closing(protocol.New(b, nil), nil)
	}
	return nil, nil, badDSN(dsn)
}

// badDSN says a DSN names no store this command opens. It never quotes the
// DSN, which may carry a password: it names only the scheme, and only when
// the text before the first colon looks like one.
func badDSN(dsn string) error {
	scheme, _, found := strings.Cut(dsn, ":")
	if !found || !isScheme(scheme) {
		return errors.New("-dsn: it has no scheme; give sqlite:PATH, a postgres:// URL or etcd://HOST:PORT[,HOST:PORT...]/PREFIX")
	}
	return fmt.Errorf("-dsn: scheme %q is none of sqlite:PATH, a postgres:// URL or etcd://HOST:PORT[,HOST:PORT...]/PREFIX", scheme)
}

// isScheme reports whether s has the form of a URL scheme (RFC 3986: a
// letter, then letters, digits, '+', '-' or '.'), at most 32 bytes.
func isScheme(s string) bool {
	if s == "" || len(s) > 32 {
		return false
	}
	for i, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z':
		case i > 0 && (r >= '0' && r <= '9' || r == '+' || r == '-' || r == '.'):
		default:
			return false
		}
	}
	return true
}

func closing(rt *protocol.Runtime, db *sql.DB) (protocol.Store, func(), error) {
	return rt, func() {
		_ = rt.Close(context.Background())
		if db != nil {
			_ = db.Close()
		}
	}, nil
}

// lines writes whole lines from concurrent handlers.
type lines struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lines) printf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprintf(l.w, format, args...)
}
