// Command peers measures leasestore's write path beside its peers, in one
// sitting, in interleaved rounds (A B C D A B C D ...), and prints medians
// and spreads in a Markdown table:
//
//   - leasestore on PostgreSQL, coalescing on and off (protocol.Runtime over
//     sqlstore/postgres, each in a schema of its own);
//   - the raw pgx pair of `leasectl bench --compare-raw` (package rawbench:
//     upsert + audit insert; delete + audit insert);
//   - cirello.io/pglock (no audit, no idempotency; heartbeats off), through
//     pgx's database/sql driver;
//   - with -sqlite, leasestore on SQLite beside rawbench's one-transaction
//     loop.
//
// The workload is leasectl bench's: each caller picks a random key of
// -keys, acquires it and, when that works, releases it; an acquire and a
// release count one operation each. Table modes: "fresh" runs on tables
// that are never analyzed (autovacuum off on them, as a new deployment
// before autovacuum's first ANALYZE); "analyzed" warms each subject up,
// then ANALYZEs its tables (autovacuum stays on). Every run opens its own
// pool of as many connections as callers and warms it up before counting.
//
// This is a module of its own so that leasestore never depends on its
// peers. Run it from this directory:
//
//	go run . -dsn postgres://root@127.0.0.1:5432/test?sslmode=disable -c 1,8,32,64 -rounds 3 -sqlite
package main

import (
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/signal"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"cirello.io/pglock"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/leasestore/leasestore/cmd/leasectl/rawbench"
	"github.com/leasestore/leasestore/internal/proccpu"
	"github.com/leasestore/leasestore/migrations"
	"github.com/leasestore/leasestore/protocol"
	"github.com/leasestore/leasestore/sqlstore/postgres"
	"github.com/leasestore/leasestore/sqlstore/sqlite"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "peers:", err)
		os.Exit(1)
	}
}

type options struct {
	dsn               string
	levels, sqliteLvl []int
	keys              int
	round, warm       time.Duration
	rounds            int
	modes, subjects   []string
	sqlite            bool
	maxConns          int
}

func run() error {
	var (
		o                                  options
		levels, sqliteLvl, modes, subjects string
		cpuprofile                         string
	)
	flag.StringVar(&o.dsn, "dsn", os.Getenv("LEASESTORE_TEST_POSTGRES_DSN"), "PostgreSQL DSN (a database the bench may create schemas in)")
	flag.StringVar(&levels, "c", "1,8,32,64", "callers of each measurement")
	flag.StringVar(&sqliteLvl, "sqlite-c", "1,8", "callers of each SQLite measurement")
	flag.IntVar(&o.keys, "keys", 100000, "keys the callers pick from")
	flag.DurationVar(&o.round, "d", 5*time.Second, "counted duration of one run")
	flag.DurationVar(&o.warm, "warm", time.Second, "uncounted warm-up of each run (connections, caches)")
	flag.IntVar(&o.rounds, "rounds", 3, "interleaved rounds per measurement")
	flag.StringVar(&modes, "tables", "analyzed,fresh", "table modes: analyzed, fresh (never analyzed)")
	flag.StringVar(&subjects, "subjects", "leasestore,leasestore-nocoalescing,raw,pglock",
		"PostgreSQL subjects (also leasestore-inflightN: coalescing with MaxInFlight N)")
	flag.BoolVar(&o.sqlite, "sqlite", false, "also measure SQLite (leasestore beside its raw loop)")
	flag.IntVar(&o.maxConns, "max-conns", 64, "pool size cap per subject")
	flag.StringVar(&cpuprofile, "cpuprofile", "", "write this process's CPU profile to the file")
	flag.Parse()
	var err error
	if o.levels, err = ints(levels); err != nil {
		return err
	}
	if o.sqliteLvl, err = ints(sqliteLvl); err != nil {
		return err
	}
	o.modes, o.subjects = strings.Split(modes, ","), strings.Split(subjects, ",")
	if cpuprofile != "" {
		f, err := os.Create(cpuprofile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	fmt.Printf("peers: %s, %d keys, %d rounds of %v (+%v warm-up) per subject and callers, load %s\n",
		time.Now().UTC().Format(time.RFC3339), o.keys, o.rounds, o.round, o.warm, loadavg())
	if o.dsn != "" {
		for _, mode := range o.modes {
			if err := pgSitting(ctx, o, mode); err != nil {
				return err
			}
		}
	}
	if o.sqlite {
		return sqliteSitting(ctx, o)
	}
	return nil
}

func ints(s string) ([]int, error) {
	var out []int
	for f := range strings.SplitSeq(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("bad count %q", f)
		}
		out = append(out, n)
	}
	return out, nil
}

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	return strings.Fields(string(b))[0]
}

// subject is one peer: open returns the acquire and release of a run with
// the given callers, and a close for the run's pool.
type subject struct {
	name string
	open func(ctx context.Context, callers int) (*handle, error)
	prep func(ctx context.Context, mode string) error // after creation: autovacuum off (fresh), ANALYZE (analyzed, after warm-up)
	drop func(ctx context.Context) error
}

type handle struct {
	acquire func(ctx context.Context, name, owner string) (token int64, ok bool, err error)
	release func(ctx context.Context, name, owner string, token int64) error
	app     string
	close   func()
	// coalescing reads leasestore's coalescing counters on PostgreSQL;
	// nil for the other subjects.
	coalescing func() postgres.CoalescingStats
}

const ttl = time.Minute

// schemaDSN returns dsn with its connections' search_path set to schema
// (the options startup parameter), in either DSN form.
func schemaDSN(dsn, schema string) string {
	if !strings.Contains(dsn, "://") {
		return dsn + " options='-c search_path=" + schema + "'"
	}
	sep := "?"
	if strings.Contains(dsn, "?") {
		sep = "&"
	}
	return dsn + sep + "options=-c%20search_path%3D" + schema
}

func admin(ctx context.Context, dsn, sql string) error {
	c, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer c.Close(context.Background())
	_, err = c.Exec(ctx, sql)
	return err
}

// tablesSQL returns the statements that prepare a schema's tables for mode.
func tablesSQL(schema, mode string, tables ...string) string {
	var b strings.Builder
	for _, t := range tables {
		if mode == "fresh" {
			fmt.Fprintf(&b, "ALTER TABLE %s.%s SET (autovacuum_enabled = off, toast.autovacuum_enabled = off);", schema, t)
		} else {
			fmt.Fprintf(&b, "ANALYZE %s.%s;", schema, t)
		}
	}
	return b.String()
}

// leasestoreSubject is leasestore on PostgreSQL; inFlight is
// postgres.Config.MaxInFlight (0: the default), negative for no coalescing.
func leasestoreSubject(ctx context.Context, dsn, sfx string, inFlight int) (*subject, error) {
	name, schema := "leasestore", "peers_ls_"+sfx
	switch {
	case inFlight < 0:
		name, schema = "leasestore-nocoalescing", "peers_lsn_"+sfx
	case inFlight > 0:
		name, schema = fmt.Sprintf("leasestore-inflight%d", inFlight), fmt.Sprintf("peers_ls%d_%s", inFlight, sfx)
	}
	noCoalescing := inFlight < 0
	if err := admin(ctx, dsn, "CREATE SCHEMA "+schema); err != nil {
		return nil, err
	}
	sdsn := schemaDSN(dsn, schema)
	cfg, err := pgx.ParseConfig(sdsn)
	if err != nil {
		return nil, err
	}
	db := stdlib.OpenDB(*cfg)
	_, err = migrations.Up(ctx, migrations.Postgres, db)
	db.Close()
	if err != nil {
		return nil, err
	}
	app := "peers-" + name + "-" + sfx
	return &subject{
		name: name,
		open: func(ctx context.Context, callers int) (*handle, error) {
			b, err := postgres.Open(ctx, sdsn, &postgres.Config{MaxConns: int32(max(callers, 2)), NoCoalescing: noCoalescing, MaxInFlight: max(inFlight, 0), ApplicationName: app})
			if err != nil {
				return nil, err
			}
			rt := protocol.New(b, nil)
			return &handle{
				app: app,
				acquire: func(ctx context.Context, n, owner string) (int64, bool, error) {
					res, err := rt.Acquire(ctx, protocol.AcquireRequest{Key: protocol.Key{Namespace: "bench", Name: n}, Owner: owner, TTL: ttl})
					if errors.Is(err, protocol.ErrConflict) || res.Status == protocol.StatusConflict {
						return 0, false, nil
					}
					if err != nil {
						return 0, false, err
					}
					return res.Lease.Token, true, nil
				},
				release: func(ctx context.Context, n, owner string, token int64) error {
					_, err := rt.Release(ctx, protocol.ReleaseRequest{Key: protocol.Key{Namespace: "bench", Name: n}, Owner: owner, Token: token})
					return err
				},
				close:      func() { _ = rt.Close(context.Background()) },
				coalescing: b.Coalescing,
			}, nil
		},
		prep: func(ctx context.Context, mode string) error {
			return admin(ctx, dsn, tablesSQL(schema, mode, "leasestore_leases", "leasestore_audit"))
		},
		drop: func(ctx context.Context) error { return admin(ctx, dsn, "DROP SCHEMA "+schema+" CASCADE") },
	}, nil
}

func rawSubject(ctx context.Context, dsn string) (*subject, error) {
	base, err := rawbench.OpenPostgres(ctx, dsn, 1)
	if err != nil {
		return nil, err
	}
	schema := base.Schema()
	return &subject{
		name: "raw",
		open: func(ctx context.Context, callers int) (*handle, error) {
			p, err := rawbench.AttachPostgres(ctx, dsn, schema, int32(callers))
			if err != nil {
				return nil, err
			}
			return &handle{
				app: p.AppName(),
				acquire: func(ctx context.Context, n, owner string) (int64, bool, error) {
					return p.Acquire(ctx, n, owner, ttl)
				},
				release: func(ctx context.Context, n, owner string, token int64) error {
					_, err := p.Release(ctx, n, owner, token)
					return err
				},
				close: func() { _ = p.Close(context.Background()) },
			}, nil
		},
		prep: func(ctx context.Context, mode string) error {
			return admin(ctx, dsn, tablesSQL(schema, mode, "raw_leases", "raw_audit"))
		},
		drop: func(ctx context.Context) error { return base.Close(ctx) },
	}, nil
}

func pglockSubject(ctx context.Context, dsn, sfx string) (*subject, error) {
	schema := "peers_pglock_" + sfx
	if err := admin(ctx, dsn, "CREATE SCHEMA "+schema); err != nil {
		return nil, err
	}
	sdsn := schemaDSN(dsn, schema)
	app := "peers-pglock-" + sfx
	newDB := func(callers int) (*sql.DB, error) {
		cfg, err := pgx.ParseConfig(sdsn)
		if err != nil {
			return nil, err
		}
		cfg.RuntimeParams["application_name"] = app
		cfg.RuntimeParams["jit"] = "off"
		cfg.RuntimeParams["enable_seqscan"] = "off" // as postgres.Open pins
		db := stdlib.OpenDB(*cfg)
		db.SetMaxOpenConns(callers)
		db.SetMaxIdleConns(callers)
		return db, nil
	}
	db, err := newDB(1)
	if err != nil {
		return nil, err
	}
	c, err := pglock.UnsafeNew(db, pglock.WithHeartbeatFrequency(0))
	if err == nil {
		err = c.CreateTable()
	}
	db.Close()
	if err != nil {
		return nil, err
	}
	return &subject{
		name: "pglock",
		open: func(ctx context.Context, callers int) (*handle, error) {
			db, err := newDB(callers)
			if err != nil {
				return nil, err
			}
			c, err := pglock.UnsafeNew(db, pglock.WithHeartbeatFrequency(0), pglock.WithLeaseDuration(ttl))
			if err != nil {
				return nil, err
			}
			var (
				mu    sync.Mutex
				locks = map[string]*pglock.Lock{}
			)
			return &handle{
				app: app,
				acquire: func(ctx context.Context, n, owner string) (int64, bool, error) {
					l, err := c.AcquireContext(ctx, n, pglock.FailIfLocked())
					if errors.Is(err, pglock.ErrNotAcquired) {
						return 0, false, nil
					}
					if err != nil {
						return 0, false, err
					}
					mu.Lock()
					locks[n+"\x00"+owner] = l
					mu.Unlock()
					return l.RecordVersionNumber(), true, nil
				},
				release: func(ctx context.Context, n, owner string, _ int64) error {
					mu.Lock()
					l := locks[n+"\x00"+owner]
					delete(locks, n+"\x00"+owner)
					mu.Unlock()
					return c.ReleaseContext(ctx, l)
				},
				close: func() { _ = db.Close() },
			}, nil
		},
		prep: func(ctx context.Context, mode string) error {
			return admin(ctx, dsn, tablesSQL(schema, mode, "locks"))
		},
		drop: func(ctx context.Context) error { return admin(ctx, dsn, "DROP SCHEMA "+schema+" CASCADE") },
	}, nil
}

// result is one run's figures.
type result struct {
	opsPerSec          float64
	p50, p99           time.Duration
	serverUS, clientUS float64 // CPU per operation; -1 when not measured
	errors             int64
	// leasestore on PostgreSQL: the operations per batched statement and
	// the share of operations batched while counting, and the limit of
	// round trips in flight at its end; batch -1 when not measured.
	batch, batchedShare float64
	limit               int
}

// measure runs one subject at callers for o.warm then o.round.
func measure(ctx context.Context, o options, s *subject, callers int, dsn string) (result, error) {
	h, err := s.open(ctx, callers)
	if err != nil {
		return result{}, fmt.Errorf("%s: open: %w", s.name, err)
	}
	defer h.close()
	var (
		counting, stopped atomic.Bool
		ops, errs         atomic.Int64
		wg                sync.WaitGroup
		lat               = make([][]time.Duration, callers)
	)
	for i := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(i), uint64(time.Now().UnixNano())))
			owner := fmt.Sprintf("bench-%d", i)
			timed := func(f func() error) error {
				t0 := time.Now()
				err := f()
				if counting.Load() {
					lat[i] = append(lat[i], time.Since(t0))
					ops.Add(1)
					if err != nil {
						errs.Add(1)
					}
				}
				return err
			}
			for !stopped.Load() && ctx.Err() == nil {
				name := "key-" + strconv.Itoa(rng.IntN(o.keys))
				var (
					token int64
					ok    bool
				)
				_ = timed(func() (err error) {
					token, ok, err = h.acquire(ctx, name, owner)
					return err
				})
				if ok {
					_ = timed(func() error { return h.release(context.WithoutCancel(ctx), name, owner, token) })
				}
			}
		}()
	}
	time.Sleep(o.warm)
	pids := serverPIDs(ctx, dsn, h.app)
	var co0, co1 postgres.CoalescingStats
	if h.coalescing != nil {
		co0 = h.coalescing()
	}
	cpu0, self0 := serverCPU(pids), proccpu.Self()
	counting.Store(true)
	t0 := time.Now()
	select {
	case <-time.After(o.round):
	case <-ctx.Done():
	}
	counting.Store(false)
	elapsed := time.Since(t0)
	cpu1, self1 := serverCPU(pids), proccpu.Self()
	if h.coalescing != nil {
		co1 = h.coalescing()
	}
	stopped.Store(true)
	wg.Wait()
	var all []time.Duration
	for _, l := range lat {
		all = append(all, l...)
	}
	slices.Sort(all)
	r := result{errors: errs.Load(), serverUS: -1, clientUS: -1, batch: -1}
	n := ops.Load()
	if n == 0 {
		return r, fmt.Errorf("%s: no operation completed", s.name)
	}
	if h.coalescing != nil {
		batches, batched := co1.Batches-co0.Batches, co1.Batched-co0.Batched
		r.batch, r.batchedShare, r.limit = 0, float64(batched)/float64(n), co1.Limit
		if batches > 0 {
			r.batch = float64(batched) / float64(batches)
		}
	}
	r.opsPerSec = float64(n) / elapsed.Seconds()
	r.p50, r.p99 = all[len(all)/2], all[min(len(all)-1, len(all)*99/100)]
	if cpu0 >= 0 && cpu1 >= 0 {
		r.serverUS = float64((cpu1 - cpu0).Microseconds()) / float64(n)
	}
	if self0 >= 0 && self1 >= 0 {
		r.clientUS = float64((self1 - self0).Microseconds()) / float64(n)
	}
	return r, nil
}

func serverPIDs(ctx context.Context, dsn, app string) []int {
	if app == "" || dsn == "" {
		return nil
	}
	c, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return nil
	}
	defer c.Close(context.Background())
	rows, err := c.Query(ctx, `SELECT pid FROM pg_stat_activity WHERE application_name = $1`, app)
	if err != nil {
		return nil
	}
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		return nil
	}
	out := make([]int, len(pids))
	for i, p := range pids {
		out[i] = int(p)
	}
	return out
}

func serverCPU(pids []int) time.Duration {
	if len(pids) == 0 {
		return -1
	}
	var d time.Duration
	for _, p := range pids {
		c := proccpu.Of(p)
		if c < 0 {
			return -1
		}
		d += c
	}
	return d
}

// sitting runs rounds of every subject at every level, interleaved, and
// prints one table per level.
func sitting(ctx context.Context, o options, title, dsn string, subjects []*subject, levels []int, base string) error {
	fmt.Printf("\n### %s\n\n", title)
	fmt.Println("| callers | subject | ops/s median | min–max | × " + base + " (median of rounds) | p50 ms | p99 ms | server CPU µs/op | client CPU µs/op | batch size, share batched, limit | errors | load before → after |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|---|---|---|")
	for _, c := range levels {
		before := loadavg()
		got := map[string][]result{}
		for range o.rounds {
			for _, s := range subjects {
				r, err := measure(ctx, o, s, c, dsn)
				if err != nil {
					return err
				}
				got[s.name] = append(got[s.name], r)
				if ctx.Err() != nil {
					return ctx.Err()
				}
			}
		}
		after := loadavg()
		for _, s := range subjects {
			rs := got[s.name]
			var ratios []float64
			for i, r := range rs {
				if b := got[base]; len(b) > i && b[i].opsPerSec > 0 {
					ratios = append(ratios, r.opsPerSec/b[i].opsPerSec)
				}
			}
			var errs int64
			for _, r := range rs {
				errs += r.errors
			}
			ops := field(rs, func(r result) float64 { return r.opsPerSec })
			fmt.Printf("| %d | %s | %.0f | %.0f–%.0f | %.2f | %.2f | %.2f | %s | %s | %s | %d | %s → %s |\n", c, s.name,
				median(ops), slices.Min(ops), slices.Max(ops), median(ratios),
				median(field(rs, func(r result) float64 { return float64(r.p50) / 1e6 })),
				median(field(rs, func(r result) float64 { return float64(r.p99) / 1e6 })),
				cpu(field(rs, func(r result) float64 { return r.serverUS })),
				cpu(field(rs, func(r result) float64 { return r.clientUS })), batching(rs), errs, before, after)
		}
	}
	return nil
}

// batching returns the medians of a leasestore subject's batch size and
// share of operations batched, and the limits its rounds ended with; "–"
// for the other subjects.
func batching(rs []result) string {
	if slices.ContainsFunc(rs, func(r result) bool { return r.batch < 0 }) {
		return "–"
	}
	limits := make([]string, len(rs))
	for i, r := range rs {
		limits[i] = strconv.Itoa(r.limit)
	}
	return fmt.Sprintf("%.1f, %.0f%%, %s", median(field(rs, func(r result) float64 { return r.batch })),
		100*median(field(rs, func(r result) float64 { return r.batchedShare })), strings.Join(limits, "/"))
}

func field(rs []result, f func(result) float64) []float64 {
	out := make([]float64, len(rs))
	for i, r := range rs {
		out[i] = f(r)
	}
	return out
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func cpu(xs []float64) string {
	if slices.Min(xs) < 0 {
		return "–"
	}
	return fmt.Sprintf("%.0f", median(xs))
}

func suffix() string { return strconv.FormatUint(rand.Uint64()%1e8, 36) }

func pgSitting(ctx context.Context, o options, mode string) error {
	sfx := suffix()
	var subjects []*subject
	defer func() {
		for _, s := range subjects {
			if err := s.drop(context.Background()); err != nil {
				fmt.Fprintf(os.Stderr, "peers: drop %s: %v\n", s.name, err)
			}
		}
	}()
	for _, name := range o.subjects {
		var (
			s   *subject
			err error
		)
		switch n, inflight := strings.CutPrefix(name, "leasestore-inflight"); {
		case name == "leasestore":
			s, err = leasestoreSubject(ctx, o.dsn, sfx, 0)
		case name == "leasestore-nocoalescing":
			s, err = leasestoreSubject(ctx, o.dsn, sfx, -1)
		case inflight:
			var k int
			if k, err = strconv.Atoi(n); err == nil && k > 0 {
				s, err = leasestoreSubject(ctx, o.dsn, sfx, k)
			} else {
				err = fmt.Errorf("bad subject %q", name)
			}
		case name == "raw":
			s, err = rawSubject(ctx, o.dsn)
		case name == "pglock":
			s, err = pglockSubject(ctx, o.dsn, sfx)
		default:
			err = fmt.Errorf("unknown subject %q", name)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		subjects = append(subjects, s)
	}
	if mode == "analyzed" {
		// Warm-up as a store in service would have had, then what
		// autovacuum's ANALYZE would leave.
		for _, s := range subjects {
			if _, err := measure(ctx, options{keys: o.keys, warm: 0, round: 2 * o.round}, s, 8, ""); err != nil {
				return err
			}
		}
	}
	for _, s := range subjects {
		if err := s.prep(ctx, mode); err != nil {
			return fmt.Errorf("%s: %s: %w", s.name, mode, err)
		}
	}
	title := "PostgreSQL, tables analyzed after a warm-up"
	if mode == "fresh" {
		title = "PostgreSQL, tables never analyzed"
	}
	return sitting(ctx, o, title, o.dsn, subjects, o.levels, "raw")
}

func sqliteSitting(ctx context.Context, o options) error {
	dir, err := os.MkdirTemp("", "leasestore-peers-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	db, err := sqlite.OpenDB(dir + "/leasestore.db")
	if err != nil {
		return err
	}
	_, err = migrations.Up(ctx, migrations.SQLite, db)
	db.Close()
	if err != nil {
		return err
	}
	b, err := sqlite.Open(ctx, dir+"/leasestore.db", nil)
	if err != nil {
		return err
	}
	rt := protocol.New(b, nil)
	defer rt.Close(context.Background())
	raw, err := rawbench.OpenSQLite(ctx, dir)
	if err != nil {
		return err
	}
	defer raw.Close(context.Background())
	noop := func() {}
	subjects := []*subject{
		{name: "leasestore-sqlite", open: func(context.Context, int) (*handle, error) {
			return &handle{
				acquire: func(ctx context.Context, n, owner string) (int64, bool, error) {
					res, err := rt.Acquire(ctx, protocol.AcquireRequest{Key: protocol.Key{Namespace: "bench", Name: n}, Owner: owner, TTL: ttl})
					if res.Status == protocol.StatusConflict {
						return 0, false, nil
					}
					if err != nil {
						return 0, false, err
					}
					return res.Lease.Token, true, nil
				},
				release: func(ctx context.Context, n, owner string, token int64) error {
					_, err := rt.Release(ctx, protocol.ReleaseRequest{Key: protocol.Key{Namespace: "bench", Name: n}, Owner: owner, Token: token})
					return err
				},
				close: noop,
			}, nil
		}},
		{name: "raw-sqlite", open: func(context.Context, int) (*handle, error) {
			return &handle{
				acquire: func(ctx context.Context, n, owner string) (int64, bool, error) {
					return raw.Acquire(ctx, n, owner, ttl)
				},
				release: func(ctx context.Context, n, owner string, token int64) error {
					_, err := raw.Release(ctx, n, owner, token)
					return err
				},
				close: noop,
			}, nil
		}},
	}
	return sitting(ctx, o, "SQLite (one file each, WAL, synchronous=FULL)", "", subjects, o.sqliteLvl, "raw-sqlite")
}
