// Package etcd is leasestore's backend on an etcd v3 cluster: a
// [protocol.Backend] through the official client go.etcd.io/etcd/client/v3,
// with every key of one store under one prefix, so that several stores
// share a cluster.
//
// Each state change is one etcd transaction holding the check (compares),
// the change, the audit record and the idempotency record (they are one
// entry: the audit record is keyed by namespace and request id). The
// fencing token is the revision of the transaction that acquired the lease
// (etcd's revision is cluster-wide and strictly increasing, so a later
// acquire always gets a greater token, across releases, sweeps and leader
// changes). Expiry is judged by the cluster: the key's liveness entry is
// attached to an etcd lease, kept by the leader, and a lease is live while
// that entry exists. Audit record ids are their etcd create revisions, so
// the trail is totally ordered in commit order. keys.go lists the layout;
// DESIGN.md ("etcd backend") gives the reasons.
//
// Open a cluster with [Open] (the Backend owns its client) or hand [New] a
// *clientv3.Client, which stays the caller's. This package must not import
// any package under sqlstore/.
package etcd

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/leasestore/leasestore/audit"
	"github.com/leasestore/leasestore/backendkit"
	"github.com/leasestore/leasestore/internal/textfield"
	"github.com/leasestore/leasestore/protocol"
)

// DefaultDialTimeout bounds [Open]'s connecting when the Config sets none
// ([Config.DialTimeout]).
const DefaultDialTimeout = 5 * time.Second

// minDerivedDial is the least dial timeout Open derives from its
// context's deadline (see Config.DialTimeout).
const minDerivedDial = time.Second

// Config says where the store lives and how to reach it. A nil *Config is
// invalid for [Open] (it needs endpoints and a prefix). [New] reads only
// Prefix and NoInit from it, and refuses as invalid a Config that sets a
// field only Open applies (Endpoints, Username, Password, TLS,
// DialTimeout): the client given to New is connected already.
type Config struct {
	// Endpoints are the cluster's client URLs or host:port pairs. Required by Open.
	Endpoints []string
	// Prefix is the key prefix of the store, e.g. "/leasestore/prod";
	// every key of the store starts with it. It has one "/" at each end
	// however it is written ("leasestore/prod", "/leasestore/prod/" and
	// "/leasestore/prod" are the same store, the one the DSN
	// etcd://HOST:PORT/leasestore/prod names). Required.
	Prefix string
	// Username and Password authenticate to a cluster with auth enabled.
	// Default: none.
	Username, Password string
	// TLS, when set, is used for the client connections (https endpoints).
	// Default: plain connections.
	TLS *tls.Config
	// DialTimeout bounds Open's connecting: until a member answers a
	// read (with Username, also authenticating, which the client does
	// while it connects). When none answers within it, Open probes each
	// endpoint for at most min(DialTimeout, 3s) more and fails as
	// unavailable, saying what it found at each. Checking the store's
	// format record (a transaction that writes it on first use: a raft
	// round trip) is bounded by Open's context only, as is all of Open:
	// past the context's deadline Open fails as timeout. Default:
	// [DefaultDialTimeout], or a third of the time left to the deadline
	// of Open's context when that is shorter, but at least a second (so
	// that the findings come before the deadline).
	DialTimeout time.Duration
	// NoInit makes Open and New refuse a prefix that holds no store yet
	// (naming `leasectl migrate up`) instead of recording the format
	// version there. Default: false, a new store is created on first use.
	NoInit bool

	// testNow, set only by this package's tests (export_test.go), judges
	// expiry by a manual clock instead of etcd leases; testStamps only
	// stamps leases and records with another clock (expiry stays the
	// cluster's).
	testNow, testStamps func() time.Time
	// testDialOptions, set only by this package's tests, are added to the
	// client's gRPC options.
	testDialOptions []grpc.DialOption
}

// Backend is the etcd backend. It implements [protocol.Backend],
// [protocol.BulkRenewer], [protocol.NamespaceLister], [protocol.Sweeper],
// [protocol.Notifier], [audit.Reader] and [audit.Pruner], and is safe for
// concurrent use. Create it with [Open] or [New]; most callers wrap it in
// a [protocol.Runtime] with protocol.New.
//
// Called directly, an operation whose context carries no deadline
// (Acquire, Renew, Release, Revoke, RenewMany, Get, List, Namespaces,
// Sweep, Health, ReadAudit) gets the runtime's default,
// [protocol.DefaultTimeout], so that it answers timeout rather than
// waiting for a cluster without quorum for ever.
type Backend struct {
	cli    *clientv3.Client
	kv     guardedKV // cli's KV, refusing a cluster whose revision went back: every Get and Txn go through it
	owned  bool      // Close closes cli
	keys   layout
	shown  string // endpoints and prefix, for messages
	now    func() time.Time
	manual bool // expiry by the test clock (Config.testNow), not etcd leases

	// outside holds the format records of stores above that checkOutside
	// found missing when the backend was made; the transaction creating
	// the store requires them missing still (createFormat).
	outside []string

	expiry leasePool // etcd leases by expiry second and TTL (leases.go)
	cache  stateCache

	testAfterRead func()        // tests: called by Follow between its read and its watch
	testProgress  time.Duration // tests: Follow's followProgress, when not 0

	dropsMu sync.Mutex
	drops   map[string]chan struct{} // claim key: closed when its drop (dropClaim) is done

	closed     atomic.Bool
	closeOnce  sync.Once
	tracked    backendkit.Background // the watches' goroutines (notify.go), started by goTracked
	claimDrops backendkit.Background // prunes' claims being freed after their prune answered (dropClaim)
	stop       chan struct{}         // closed by Close
	// watching is the context of the watches (Subscribe), ended by Close
	// (endWatches), so that a watch being made again on a cluster that
	// does not answer ends at once.
	watching   context.Context
	endWatches context.CancelFunc
	release    func() // Open's: ends the client's base context
	// members, set by Open, holds the client's connections by member, so
	// that a frozen member's are closed (frozen.go); nil for New's client.
	members       *memberConns
	probeMu       sync.Mutex
	subscriptions int  // live subscriptions (Subscribe)
	probing       bool // probeWatches runs
	// closer runs Close's work (shut) once, in a goroutine, and lets a
	// Close whose context ends answer while that work waits for what is
	// in flight.
	closer backendkit.Closer
}

var (
	_ protocol.Backend         = (*Backend)(nil)
	_ protocol.BulkRenewer     = (*Backend)(nil)
	_ protocol.NamespaceLister = (*Backend)(nil)
	_ protocol.Sweeper         = (*Backend)(nil)
	_ protocol.Notifier        = (*Backend)(nil)
	_ audit.Reader             = (*Backend)(nil)
	_ audit.Pruner             = (*Backend)(nil)
)

// Open connects to the cluster of cfg and opens the store under
// cfg.Prefix, recording the store's format version on first use (unless
// cfg.NoInit) and refusing a store of another version. The Backend owns
// the client and closes it in Close.
//
// cfg.DialTimeout bounds connecting; the rest of Open (checking the
// format record: a transaction, a raft round trip) runs under ctx alone.
// ctx bounds all of Open: past its deadline Open fails as timeout.
func Open(ctx context.Context, cfg *Config) (*Backend, error) {
	if cfg == nil || len(cfg.Endpoints) == 0 {
		return nil, errInvalid("etcd: no endpoints given")
	}
	if err := checkPrefix(cfg.Prefix); err != nil {
		return nil, err
	}
	dial := cfg.DialTimeout
	if dial <= 0 {
		dial = DefaultDialTimeout
		// A third of the caller's time when that is shorter, so that the
		// probe (at most as long again) says what is wrong with a third
		// to spare; never below minDerivedDial, which a healthy cluster
		// needs to connect (and authenticate) and below which the
		// caller's deadline answers.
		if d, ok := ctx.Deadline(); ok {
			dial = max(min(dial, (time.Until(d)/3).Truncate(time.Millisecond)), minDerivedDial)
		}
	}
	connectBy := time.Now().Add(dial)
	members := &memberConns{}
	// With a user, clientv3.New authenticates before it returns, under the
	// dial timeout and the client's own context: that context ends with
	// ctx until Open returns.
	base, release := context.WithCancel(context.WithoutCancel(ctx))
	stop := context.AfterFunc(ctx, release)
	fail := func(err error) (*Backend, error) {
		stop()
		release()
		return nil, err
	}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints: cfg.Endpoints, DialTimeout: dial, TLS: cfg.TLS,
		Username: cfg.Username, Password: cfg.Password, Context: base,
		// The client's own log would print on leasectl's stderr; its
		// errors reach callers through the operations' results.
		Logger:               zap.NewNop(),
		DialKeepAliveTime:    10 * time.Second,
		DialKeepAliveTimeout: 5 * time.Second,
		DialOptions:          append(members.dialOptions(), cfg.testDialOptions...),
	})
	if err != nil {
		return fail(connectError(ctx, cfg, dial, err))
	}
	// The client dials in the background and retries a failed handshake
	// for as long as an operation's context lives: the first contact, a
	// member's answer to a serializable read (no raft round trip), is
	// bounded by the dial timeout, so that a wrong address or TLS setting
	// fails instead of hanging.
	first, cancel := context.WithDeadline(ctx, connectBy)
	_, err = cli.Get(first, newLayout(canonicalPrefix(cfg.Prefix)).meta(), clientv3.WithSerializable(), clientv3.WithCountOnly())
	cancel()
	if err != nil {
		_ = cli.Close()
		return fail(connectError(ctx, cfg, dial, err))
	}
	b, err := newBackend(ctx, cli, cfg, true)
	if err != nil {
		_ = cli.Close()
		return fail(err)
	}
	if !stop() { // ctx ended, and the client's context with it
		_ = b.Close(context.Background())
		release()
		return nil, interpretError(ctx, protocol.OpHealth, b.shown, cfg.Username != "", ctx.Err())
	}
	b.release = release
	b.members = members
	return b, nil
}

// connectError interprets a failure of Open's connecting: the caller's
// deadline or cancel wins; past the dial timeout errFirstContact says
// what each endpoint shows; anything else is the cluster's answer.
func connectError(ctx context.Context, cfg *Config, dial time.Duration, err error) error {
	where := "etcd " + strings.Join(cfg.Endpoints, ",")
	if cause := ended(ctx); cause != nil {
		if errors.Is(err, context.Canceled) || status.Code(err) == codes.Canceled {
			err = cause // the client's context ended with ctx
		}
		return interpretError(ctx, protocol.OpHealth, where, cfg.Username != "", err)
	}
	if errors.Is(err, context.DeadlineExceeded) || status.Code(err) == codes.DeadlineExceeded {
		return errFirstContact(ctx, cfg, dial, err)
	}
	return interpretError(ctx, protocol.OpHealth, where, cfg.Username != "", err)
}

// New opens the store under cfg.Prefix on cli, which stays the caller's:
// Close leaves it open. It records or checks the format version as Open
// does (cfg.NoInit as for Open). cli is used as it is, so a cfg that sets
// a field only Open applies (Endpoints, Username and Password, TLS,
// DialTimeout) is refused as invalid, naming each: configure cli instead.
// Unlike Open's, the store does not close cli's connections to a member
// whose watch stream froze (frozen.go): cli's keepalive alone bounds how
// late a holder then hears a loss, and clientv3.Config's default has none
// (give cli DialKeepAliveTime 10s and DialKeepAliveTimeout 5s, as Open
// does; docs/etcd.md).
func New(ctx context.Context, cli *clientv3.Client, cfg *Config) (*Backend, error) {
	if cfg == nil {
		return nil, errInvalid("etcd: no prefix given")
	}
	var set []string
	for _, f := range []struct {
		name string
		set  bool
	}{
		{"Endpoints", len(cfg.Endpoints) > 0}, {"Username", cfg.Username != ""}, {"Password", cfg.Password != ""},
		{"TLS", cfg.TLS != nil}, {"DialTimeout", cfg.DialTimeout != 0},
	} {
		if f.set {
			set = append(set, "Config."+f.name)
		}
	}
	if len(set) > 0 {
		return nil, errInvalid("etcd: new: " + strings.Join(set, ", ") + " configure the client Open makes; " +
			"New uses your *clientv3.Client as it is: set them in its clientv3.Config (or use Open)")
	}
	if err := checkPrefix(cfg.Prefix); err != nil {
		return nil, err
	}
	return newBackend(ctx, cli, cfg, false)
}

func checkPrefix(p string) error {
	if strings.Trim(p, "/") == "" {
		return errInvalid("etcd: a key prefix is required (e.g. /leasestore), so that stores can share a cluster")
	}
	return textfield.Validate("etcd prefix", p, 256)
}

func errInvalid(msg string) error {
	return &protocol.Error{Op: protocol.OpHealth, Status: protocol.StatusInvalid, Message: msg}
}

func newBackend(ctx context.Context, cli *clientv3.Client, cfg *Config, owned bool) (*Backend, error) {
	keys := newLayout(canonicalPrefix(cfg.Prefix))
	b := &Backend{
		cli: cli, kv: guardedKV{KV: cli.KV, guard: &revisionGuard{}}, owned: owned, keys: keys, now: time.Now,
		shown: fmt.Sprintf("etcd %s prefix %s", strings.Join(cli.Endpoints(), ","), keys.prefix),
		stop:  make(chan struct{}),
	}
	watching, endWatches := context.WithCancel(context.Background())
	b.watching, b.endWatches = metadata.AppendToOutgoingContext(watching, watchTag, "notify"), endWatches
	if cfg.testStamps != nil {
		b.now = cfg.testStamps
	}
	if cfg.testNow != nil {
		b.now, b.manual = cfg.testNow, true
	}
	b.expiry.cli = cli
	b.cache.init()
	var err error
	if b.outside, err = b.checkOutside(ctx); err != nil {
		return nil, err
	}
	if _, err := b.ensureFormat(ctx, !cfg.NoInit); err != nil {
		return nil, err
	}
	return b, nil
}

// checkOutside refuses a prefix that lies in the lease or audit entries
// of another store (its PREFIX/k/ or PREFIX/a/): that store would read
// this one's entries as its own (a namespace "k/..." in its list, an
// audit record it cannot decode) and delete them with its own. Only the
// prefixes above whose next segment is "k" or "a" are looked up, in one
// transaction (none for most prefixes). A store created later above an
// existing one is refused by ensureFormat (nestedStore); one created
// above while this one is being created, by the transaction creating it,
// which requires the format records read here (absent) missing still.
//
// The format records looked up lie outside the prefix: a user whose role
// may use only the prefix (as docs/etcd.md advises) may not read them.
// When the cluster refuses the transaction so, each is read alone and
// those the user may not read are not checked: a store there is the
// concern of its own users, not one this user can see or change. It
// returns the format records it read and found missing.
func (b *Backend) checkOutside(ctx context.Context) (absent []string, _ error) {
	p := b.keys.prefix
	var outer []string
	var gets []clientv3.Op
	for i := 1; i < len(p); i++ {
		if p[i-1] == '/' && (strings.HasPrefix(p[i:], "k/") || strings.HasPrefix(p[i:], "a/")) {
			outer = append(outer, p[:i])
			gets = append(gets, clientv3.OpGet(newLayout(p[:i]).meta(), clientv3.WithCountOnly()))
		}
	}
	if len(gets) == 0 {
		return nil, nil
	}
	counts := make([]int64, len(gets)) // -1: the user may not read it
	resp, err := b.kv.Txn(ctx).Then(gets...).Commit()
	switch {
	case err == nil:
		for i, r := range resp.Responses {
			counts[i] = r.GetResponseRange().Count
		}
	case errors.Is(err, rpctypes.ErrPermissionDenied):
		for i, o := range outer {
			g, err := b.kv.Get(ctx, newLayout(o).meta(), clientv3.WithCountOnly())
			if errors.Is(err, rpctypes.ErrPermissionDenied) {
				counts[i] = -1
				continue
			}
			if err != nil {
				return nil, b.interpret(ctx, protocol.OpHealth, err)
			}
			counts[i] = g.Count
		}
	default:
		return nil, b.interpret(ctx, protocol.OpHealth, err)
	}
	for i, n := range counts {
		if n == 0 {
			absent = append(absent, newLayout(outer[i]).meta())
		}
		if n > 0 {
			return nil, errInvalid(fmt.Sprintf("etcd: prefix %s lies in the entries of the store under %s, which would read and delete them as its own: choose a prefix outside %sk/ and %sa/",
				p, outer[i], outer[i], outer[i]))
		}
	}
	return absent, nil
}

// ensureFormat reads the store's meta entry and refuses another format
// version; with create, it records FormatVersion when the entry is
// missing (a new store), unless another store lies in the store's entry
// ranges (nestedStore). It reports whether it wrote the entry. The write
// applies only while no key of the entry ranges was written since they
// were read; when one was, ensureFormat reads again, up to createAttempts
// times in all. When the cluster refuses the transaction that may write
// it, as a change (a role that may only read the prefix, the NOSPACE
// alarm), an existing store is checked by a read, so that it opens to be
// read (Health says why changes fail); a missing one is that refusal.
// Every way, it reads the store's revision mark in the same transaction
// and refuses a store whose mark is not below the cluster's revision
// (checkMark).
func (b *Backend) ensureFormat(ctx context.Context, create bool) (created bool, err error) {
	meta, mark := b.keys.meta(), b.keys.revMark()
	if !create {
		_, err := b.readFormat(ctx)
		return false, err
	}
	for attempt := 1; ; attempt++ {
		resp, err := b.kv.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(meta), "=", 0)).
			Else(clientv3.OpGet(meta), clientv3.OpGet(mark)).Commit()
		if err != nil {
			return false, b.formatRefused(ctx, err)
		}
		if resp.Succeeded {
			if resp, err = b.createFormat(ctx); err != nil {
				return false, err
			}
			if resp.Succeeded {
				return true, b.checkMark(protocol.OpHealth, resp.Responses[1].GetResponseRange().Kvs, resp.Header.Revision)
			}
			if len(resp.Responses[0].GetResponseRange().Kvs) == 0 {
				if _, err := b.checkOutside(ctx); err != nil {
					return false, err // a store above was created meanwhile
				}
				if attempt == createAttempts {
					return false, errInvalid(fmt.Sprintf("etcd: prefix %s holds no store, and other clients wrote under %sk/ or %sa/ while it was being created, %d times: try again",
						b.keys.prefix, b.keys.prefix, b.keys.prefix, createAttempts))
				}
				continue
			}
		}
		if err := b.checkFormat(resp.Responses[0].GetResponseRange().Kvs[0].Value); err != nil {
			return false, err
		}
		return false, b.checkMark(protocol.OpHealth, resp.Responses[1].GetResponseRange().Kvs, resp.Header.Revision)
	}
}

// createAttempts bounds how often ensureFormat reads the store's entry
// ranges again because a key was written there between its read and its
// write of the format record.
const createAttempts = 4

// createFormat refuses a store with another store in its entry ranges
// (nestedStore) and else writes the format record, in a transaction that
// applies only while the record is missing, no key of the entry ranges
// was written since nestedStore read them, and the format records of the
// stores above that checkOutside found missing (b.outside) are missing
// still: of two stores created at once, one below the other, one is
// refused. It answers the record and the revision mark (the Else branch:
// the record and the mark too).
func (b *Backend) createFormat(ctx context.Context) (*clientv3.TxnResponse, error) {
	inner, rev, err := atOneRevisionOf(func() (string, int64, error) { return b.nestedStore(ctx) })
	if err != nil {
		return nil, err
	}
	if inner != "" {
		return nil, errInvalid(fmt.Sprintf("etcd: prefix %s holds no store, but the store under %s lies in its entries (%sk/ and %sa/): a store there would read and delete that store's entries as its own: choose another prefix",
			b.keys.prefix, inner, b.keys.prefix, b.keys.prefix))
	}
	meta, mark := b.keys.meta(), b.keys.revMark()
	val, _ := json.Marshal(formatRecord{Format: FormatVersion, CreatedAt: time.Now().UTC().Format(time.RFC3339)})
	conds := []clientv3.Cmp{
		clientv3.Compare(clientv3.CreateRevision(meta), "=", 0),
		clientv3.Compare(clientv3.ModRevision(b.keys.leases()), "<", rev+1).WithPrefix(),
		clientv3.Compare(clientv3.ModRevision(b.keys.audits()), "<", rev+1).WithPrefix(),
	}
	for _, above := range b.outside {
		conds = append(conds, clientv3.Compare(clientv3.CreateRevision(above), "=", 0))
	}
	// A destroy mark that a Destroy could not delete goes with the creation.
	resp, err := b.kv.Txn(ctx).If(conds...).
		Then(clientv3.OpPut(meta, string(val)), clientv3.OpGet(mark), clientv3.OpDelete(b.keys.destroyMark())).
		Else(clientv3.OpGet(meta), clientv3.OpGet(mark)).Commit()
	if err != nil {
		return nil, b.formatRefused(ctx, err)
	}
	return resp, nil
}

// nestedStore looks through the keys of the store's entry ranges
// (PREFIX/k/, PREFIX/a/), keys only a page at a time, at one revision rev,
// for another store's format record (isFormatRecord), and returns that
// store's prefix ("" when none). Any other key there is another client's
// and stays beside the store (Destroy keeps such keys too).
func (b *Backend) nestedStore(ctx context.Context) (inner string, rev int64, _ error) {
	for _, family := range []string{b.keys.leases(), b.keys.audits()} {
		start, end := family, clientv3.GetPrefixRangeEnd(family)
		for {
			opts := []clientv3.OpOption{clientv3.WithRange(end), clientv3.WithKeysOnly(), clientv3.WithLimit(scanPage)}
			if rev != 0 {
				opts = append(opts, clientv3.WithRev(rev))
			}
			resp, err := b.kv.Get(ctx, start, opts...)
			if err != nil {
				return "", 0, b.interpret(ctx, protocol.OpHealth, err)
			}
			if rev == 0 {
				rev = resp.Header.Revision
			}
			for _, kv := range resp.Kvs {
				if q, err := b.isFormatRecord(ctx, string(kv.Key), rev); q != "" || err != nil {
					return q, rev, err
				}
			}
			if !resp.More || len(resp.Kvs) == 0 {
				break
			}
			start = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
		}
	}
	return "", rev, nil
}

// isFormatRecord returns the prefix of the store whose format record key
// is, as of rev, or "" when key is none: the key of a store's format
// record is its canonical prefix (a valid one: checkPrefix) followed by
// "meta", and its value a formatRecord. Keys holding control characters
// (every lease entry, audit record and mark) are ruled out without a read.
func (b *Backend) isFormatRecord(ctx context.Context, key string, rev int64) (string, error) {
	q, ok := strings.CutSuffix(key, metaSuffix)
	if !ok || canonicalPrefix(q) != q || checkPrefix(q) != nil {
		return "", nil
	}
	g, err := b.kv.Get(ctx, key, clientv3.WithRev(rev))
	if err != nil {
		return "", b.interpret(ctx, protocol.OpHealth, err)
	}
	var f formatRecord
	if len(g.Kvs) == 0 || json.Unmarshal(g.Kvs[0].Value, &f) != nil || f.Format <= 0 {
		return "", nil
	}
	return q, nil
}

// formatRefused interprets ensureFormat's failed transaction: when the
// cluster refused it as a change, a store found by a read answers.
func (b *Backend) formatRefused(ctx context.Context, err error) error {
	if refusesChanges(err) {
		if found, rerr := b.readFormat(ctx); found {
			return rerr
		}
	}
	return b.interpret(ctx, protocol.OpHealth, err)
}

// readFormat checks the store's format version and revision mark by a
// read (one transaction of two gets); found reports whether the read
// answered and found the store (a missing one is ErrNoStore).
func (b *Backend) readFormat(ctx context.Context) (found bool, err error) {
	resp, err := b.kv.Txn(ctx).Then(clientv3.OpGet(b.keys.meta()), clientv3.OpGet(b.keys.revMark())).Commit()
	if err != nil {
		return false, b.interpret(ctx, protocol.OpHealth, err)
	}
	kvs := resp.Responses[0].GetResponseRange().Kvs
	if len(kvs) == 0 {
		return false, b.formatError(0)
	}
	if err := b.checkFormat(kvs[0].Value); err != nil {
		return true, err
	}
	return true, b.checkMark(protocol.OpHealth, resp.Responses[1].GetResponseRange().Kvs, resp.Header.Revision)
}

func (b *Backend) checkFormat(v []byte) error {
	var f formatRecord
	if err := json.Unmarshal(v, &f); err != nil {
		return &protocol.Error{Op: protocol.OpHealth, Status: protocol.StatusUnavailable,
			Message: fmt.Sprintf("%s: the meta entry %s is not leasestore's", b.shown, b.keys.meta()), Err: err}
	}
	if f.Format != FormatVersion {
		return b.formatError(f.Format)
	}
	return nil
}

// ErrNoStore is matched (errors.Is) by the error of Open, New and Health
// when the prefix holds no store (no meta entry): with Config.NoInit, or
// after the store was destroyed. Every change (acquire, renew, release,
// revoke, RenewMany, Sweep, PruneAudit) of a Backend whose store was
// destroyed since it was opened fails so too, having written nothing, and
// a follower of its trail ends with such an error (see [Backend.Follow]).
var ErrNoStore = errors.New("etcd: no leasestore store under this prefix")

func (b *Backend) formatError(found int) error {
	if found == 0 {
		return b.interpret(context.Background(), protocol.OpHealth, ErrNoStore)
	}
	msg := fmt.Sprintf("%s: the store has format version %d; this release reads version %d", b.shown, found, FormatVersion)
	if found > FormatVersion {
		msg += ": upgrade leasestore"
	}
	return &protocol.Error{Op: protocol.OpHealth, Status: protocol.StatusUnavailable, Message: msg}
}

// Name returns "etcd".
func (b *Backend) Name() string { return "etcd" }

// Prefix returns the store's key prefix (ending with "/").
func (b *Backend) Prefix() string { return b.keys.prefix }

// Client returns the etcd client the Backend uses (owned by the Backend
// when it came from Open).
func (b *Backend) Client() *clientv3.Client { return b.cli }

// Health reads the store's meta entry and checks its format version, in
// a transaction shaped as a change: puts of the store's entries in the
// branch never taken. The cluster treats it as it would a change (a raft
// round trip, so it needs a leader and a quorum; refused under a NOSPACE
// alarm, and for a user whose role may only read the prefix), so Health
// fails while changes would, though reads still work. The same
// transaction reads the store's revision mark: a store copied into
// another cluster, whose revision is not above the mark, is refused
// naming the fix (checkMark).
func (b *Backend) Health(ctx context.Context) error {
	ctx, cancel := b.callContext(ctx)
	defer cancel()
	if err := b.open(protocol.OpHealth); err != nil {
		return err
	}
	meta := b.keys.meta()
	// No version is below 0, so the puts are never made; yet they are not
	// dead code. etcd checks the permissions of both branches (so Health
	// fails for a user who may not write the format record, the leases,
	// the trail or the revision mark every change raises: the first keys
	// of PREFIX/k/ and PREFIX/a/ stand for their families), and only a
	// transaction with a write goes through raft and is refused under the
	// NOSPACE alarm; a read-only one is answered from a read index.
	// TestHealthFailsWhileWritesFail pins each.
	resp, err := b.kv.Txn(ctx).If(clientv3.Compare(clientv3.Version(meta), "<", 0)).
		Then(clientv3.OpPut(meta, ""), clientv3.OpPut(b.keys.leases(), ""), clientv3.OpPut(b.keys.audits(), ""),
			clientv3.OpPut(b.keys.revMark(), "")).
		Else(clientv3.OpGet(meta), clientv3.OpGet(b.keys.revMark())).Commit()
	if err != nil {
		return b.interpret(ctx, protocol.OpHealth, err)
	}
	if resp.Succeeded {
		return errInternal(protocol.OpHealth, "%s: the cluster found a version below 0 for %s", b.shown, meta)
	}
	kvs := resp.Responses[0].GetResponseRange().Kvs
	if len(kvs) == 0 {
		return b.formatError(0)
	}
	if err := b.checkFormat(kvs[0].Value); err != nil {
		return err
	}
	return b.checkMark(protocol.OpHealth, resp.Responses[1].GetResponseRange().Kvs, resp.Header.Revision)
}

// Close stops the Backend's watches (each subscription gets its last
// signal) and, when the Backend came from Open, closes its client. It
// first waits for the freeing of the request id of a prune that stopped
// early, when that went on after the prune answered (at most five
// seconds; see [Backend.PruneAudit]). Every call from the moment Close
// begins answers closed, matching [protocol.ErrClosed]; so does an
// operation in flight when the client is closed.
//
// Close returns once all that is done. When ctx ends first (or had ended
// already) while Close waits for such a freeing (a write to a cluster that
// may not answer), Close returns at once with a timeout error that
// matches ctx's and says what it was waiting for: the Backend stays
// closed, and closes its client in the background once that wait ends.
// With nothing in flight there is nothing to wait for: Close closes the
// Backend and returns nil whatever ctx says. Close is idempotent: a later
// call waits, in the same way, for the first to finish and returns its
// error.
func (b *Backend) Close(ctx context.Context) error {
	b.closeOnce.Do(func() {
		b.closed.Store(true)
		close(b.stop) // before endWatches: a watch that ends with it signals its last
		b.endWatches()
	})
	left, err := b.closer.Close(ctx, b.shut)
	if left == "" {
		return err
	}
	return backendkit.NewError(protocol.OpClose, protocol.StatusTimeout, ctx.Err(),
		"%s: the context ended while Close waited for %s; every call answers closed from now on, "+
			"and Close finishes in the background once that wait ends (call Close again to wait for it)", b.shown, left)
}

// stepClaimDrops is the step of shut that waits for what is in flight,
// as a Close cut off by its context names it.
const stepClaimDrops = "a prune's freeing of its request id (a write to the cluster, at most 5s)"

// shut is Close's work, in a goroutine of its own (see Backend.closer).
func (b *Backend) shut() error {
	b.closer.Await(stepClaimDrops, b.claimDrops.TryWait, b.claimDrops.Wait)
	// The watches end at once: Close ended their contexts and stop.
	b.tracked.Wait()
	var err error
	if b.owned {
		err = b.cli.Close()
	}
	if b.release != nil {
		b.release()
	}
	return err
}

// goTracked runs f in a goroutine that Close waits for, and reports
// whether it did: it does not once Close has begun.
func (b *Backend) goTracked(f func()) bool {
	return !b.closed.Load() && b.tracked.Go(f) != nil
}

// callContext returns the context of one call: ctx, bounded by
// [protocol.DefaultTimeout] when it has no deadline (a backend called
// directly, see [backendkit.WithDeadline]), and ended, with the cause
// errClientClosed, as soon as the client closes. The client's calls retry
// a call its closing cut short (for about 2.5s, or until the deadline), so
// without that an operation in flight at Close would answer timeout, late,
// rather than closed (interpret). Call the cancel when the call is done.
func (b *Backend) callContext(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancelDeadline := backendkit.WithDeadline(ctx)
	ctx, cancel := context.WithCancelCause(ctx)
	stop := context.AfterFunc(b.cli.Ctx(), func() { cancel(errClientClosed) })
	return ctx, func() {
		stop()
		cancel(nil)
		cancelDeadline()
	}
}

// errClientClosed is the cause with which a call's context ends when the
// client closes (callContext).
var errClientClosed = errors.New("etcd: the client was closed")

// closedMessage is the message of an operation's closed answer.
const closedMessage = "etcd: the backend was closed"

func errClosed(op protocol.Op) error {
	return &protocol.Error{Op: op, Status: protocol.StatusClosed, Message: closedMessage}
}

// Migrate records the format version in a new store, or checks that of an
// existing one: the etcd store has no schema, so there is nothing else to
// migrate. It reports whether it recorded the version. Without a deadline
// in ctx it has the runtime's default ([backendkit.WithDeadline]), as
// every operation does.
func (b *Backend) Migrate(ctx context.Context) (recorded bool, err error) {
	ctx, cancel := b.callContext(ctx)
	defer cancel()
	return b.ensureFormat(ctx, true)
}

// destroyOps bounds the range deletions of one of Destroy's transactions,
// below etcd's default --max-txn-ops (128) with the three it adds (the
// destroy mark, at most one range split around it, the format record and
// the revision mark).
const destroyOps = 100

// destroyAttempts bounds how often Destroy reads the store again because
// its entries changed between its read and its deletion.
const destroyAttempts = 4

// Destroy deletes every entry of the store (its leases, its trail, the
// prunes' marks and claims, its format record and its revision mark), and
// reports how many keys went. Other keys under the prefix stay: a store
// whose prefix lies below this one's (PREFIX/team/) is another store, and
// a key under PREFIX/k/ or PREFIX/a/ that is no entry of the store (as its
// reads tell: parseLeaseKey, ownAuditKey) is another client's. Destroy
// reads the keys of both families at one revision and deletes each run of
// the store's entries between other keys with one range, in one
// transaction (in several of up to destroyOps ranges when other keys lie
// among the entries, the format record going with the last, so that one
// cut short leaves a store to destroy again). A transaction applies only
// while no key of the two families was written since the read; when one
// was (the store is in use), Destroy reads again, up to destroyAttempts
// times in all. Each transaction also puts the destroy mark
// (PREFIX/a/\x01destroy), deleted once Destroy is done: a follower of the
// trail ([Backend.Follow]) ends with an error matching [ErrNoStore] rather
// than report the deletions as tampering. Every change of a Backend still
// open on the destroyed store then fails matching [ErrNoStore], writing
// nothing. It is `leasectl migrate down --destroy-data` on etcd, whose
// --timeout bounds it. Without a deadline in ctx it has the runtime's
// default ([backendkit.WithDeadline]), as every operation does.
func (b *Backend) Destroy(ctx context.Context) (int64, error) {
	ctx, cancel := b.callContext(ctx)
	defer cancel()
	var n int64
	for attempt := 1; ; attempt++ {
		ranges, rev, err := atOneRevisionOf(func() ([][2]string, int64, error) { return b.entryRanges(ctx) })
		if err != nil {
			return n, err
		}
		done, deleted, err := b.deleteRanges(ctx, ranges, rev)
		n += deleted
		if done || err != nil {
			b.cache.init()
			return n, err
		}
		if attempt == destroyAttempts {
			b.cache.init()
			return n, backendkit.NewError(protocol.OpHealth, protocol.StatusUnavailable, nil,
				"%s: the store's entries changed while it was destroyed, %d times (%d keys deleted): stop the services that use it and run again",
				b.shown, destroyAttempts, n)
		}
	}
}

// entryRanges returns the key ranges [from, to) that hold the store's
// lease and audit entries and no other key, as of the revision rev it
// read them at.
func (b *Backend) entryRanges(ctx context.Context) (ranges [][2]string, rev int64, _ error) {
	for _, family := range []struct {
		prefix string
		own    func(string) bool
	}{
		{b.keys.leases(), func(k string) bool { _, _, ok := b.keys.parseLeaseKey(k); return ok }},
		{b.keys.audits(), b.keys.ownAuditKey},
	} {
		first, last := "", "" // the run of entries under way, first == "" when none
		flush := func() {
			if first != "" {
				ranges = append(ranges, [2]string{first, last + "\x00"})
				first = ""
			}
		}
		start, end := family.prefix, clientv3.GetPrefixRangeEnd(family.prefix)
		for {
			opts := []clientv3.OpOption{clientv3.WithRange(end), clientv3.WithKeysOnly(), clientv3.WithLimit(scanPage)}
			if rev != 0 {
				opts = append(opts, clientv3.WithRev(rev))
			}
			resp, err := b.kv.Get(ctx, start, opts...)
			if err != nil {
				return nil, 0, b.interpret(ctx, protocol.OpHealth, err)
			}
			if rev == 0 {
				rev = resp.Header.Revision
			}
			for _, kv := range resp.Kvs {
				k := string(kv.Key)
				if !family.own(k) {
					flush()
					continue
				}
				if first == "" {
					first = k
				}
				last = k
			}
			if !resp.More || len(resp.Kvs) == 0 {
				break
			}
			start = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
		}
		flush()
	}
	return ranges, rev, nil
}

// deleteRanges deletes ranges, then the format record and the revision
// mark, while no lease or audit key was written after rev; done reports
// whether it got to the end (else a key was written: read again). Each
// transaction also puts the destroy mark (so that a follower of the trail
// tells its deletions from tampering: yieldEvents), which the ranges go
// around and the compares leave out; once the last applied, a transaction
// of its own deletes the mark (when that fails, the next creation of the
// store does: createFormat).
func (b *Backend) deleteRanges(ctx context.Context, ranges [][2]string, rev int64) (done bool, deleted int64, _ error) {
	mark, trail := b.keys.destroyMark(), b.keys.audits()
	unchanged := []clientv3.Cmp{
		clientv3.Compare(clientv3.ModRevision(b.keys.leases()), "<", rev+1).WithPrefix(),
		clientv3.Compare(clientv3.ModRevision(trail), "<", rev+1).WithRange(mark),
		clientv3.Compare(clientv3.ModRevision(mark+"\x00"), "<", rev+1).WithRange(clientv3.GetPrefixRangeEnd(trail)),
	}
	ranges = around(ranges, mark)
	for {
		n := min(len(ranges), destroyOps)
		ops := make([]clientv3.Op, 0, n+3)
		for _, r := range ranges[:n] {
			ops = append(ops, clientv3.OpDelete(r[0], clientv3.WithRange(r[1])))
		}
		ops = append(ops, clientv3.OpPut(mark, "destroy"))
		ranges = ranges[n:]
		last := len(ranges) == 0
		if last {
			ops = append(ops, clientv3.OpDelete(b.keys.meta()), clientv3.OpDelete(b.keys.revMark()))
		}
		resp, err := b.kv.Txn(ctx).If(unchanged...).Then(ops...).Commit()
		if err != nil {
			return false, deleted, b.interpret(ctx, protocol.OpHealth, err)
		}
		if !resp.Succeeded {
			return false, deleted, nil
		}
		for _, r := range resp.Responses {
			deleted += r.GetResponseDeleteRange().GetDeleted()
		}
		if last {
			// A failure leaves the mark, which no read takes for an entry.
			_, _ = b.kv.Txn(ctx).Then(clientv3.OpDelete(mark)).Commit()
			return true, deleted, nil
		}
	}
}

// around returns ranges with each range that holds key split into the
// ranges before and after it (etcd refuses a transaction that puts a key
// one of its range deletions holds).
func around(ranges [][2]string, key string) [][2]string {
	out := make([][2]string, 0, len(ranges)+1)
	for _, r := range ranges {
		if r[0] > key || key >= r[1] {
			out = append(out, r)
			continue
		}
		if r[0] < key {
			out = append(out, [2]string{r[0], key})
		}
		if after := key + "\x00"; after < r[1] {
			out = append(out, [2]string{after, r[1]})
		}
	}
	return out
}

// Counts returns how many lease keys (live, expired or kept by a
// lock-delay: each key once, whatever entries it has) and audit records
// the store holds, read at one revision. It counts what the reads see:
// keys that parse as the store's leases and records (parseLeaseKey,
// parseAuditKey), not the prune mark, the marks of what prunes removed, the
// claims of prunes under way, nor another client's keys under the prefix.
// It reads every key of the trail (keys only, a page at a time).
// Without a deadline in ctx it has the runtime's default
// ([backendkit.WithDeadline]), as every operation does.
func (b *Backend) Counts(ctx context.Context) (leases, records int64, err error) {
	ctx, cancel := b.callContext(ctx)
	defer cancel()
	err = atOneRevision(func() error {
		leases, records = 0, 0
		var rev int64
		start, end := b.keys.audits(), clientv3.GetPrefixRangeEnd(b.keys.audits())
		for {
			opts := []clientv3.OpOption{clientv3.WithRange(end), clientv3.WithKeysOnly(), clientv3.WithLimit(auditPage)}
			if rev != 0 {
				opts = append(opts, clientv3.WithRev(rev))
			}
			resp, err := b.kv.Get(ctx, start, opts...)
			if err != nil {
				return b.interpret(ctx, protocol.OpHealth, err)
			}
			if rev == 0 {
				rev = resp.Header.Revision
			}
			for _, kv := range resp.Kvs {
				if _, _, ok := b.keys.parseAuditKey(string(kv.Key)); ok {
					records++
				}
			}
			if !resp.More || len(resp.Kvs) == 0 {
				break
			}
			start = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
		}
		all := b.keys.leases()
		return b.scan(ctx, protocol.OpHealth, all, clientv3.GetPrefixRangeEnd(all), rev, func(protocol.Key, keyState) bool {
			leases++
			return true
		})
	})
	if err != nil {
		return 0, 0, err
	}
	return leases, records, nil
}

// Created reads when the store's format version was recorded (its meta
// entry's created_at, to the second, UTC): zero when the prefix holds no
// store or its meta entry does not say. Without a deadline in ctx it has
// the runtime's default ([backendkit.WithDeadline]), as every operation
// does.
func (b *Backend) Created(ctx context.Context) (time.Time, error) {
	ctx, cancel := b.callContext(ctx)
	defer cancel()
	g, err := b.kv.Get(ctx, b.keys.meta())
	if err != nil {
		return time.Time{}, b.interpret(ctx, protocol.OpHealth, err)
	}
	if len(g.Kvs) == 0 {
		return time.Time{}, nil
	}
	var f formatRecord
	if err := json.Unmarshal(g.Kvs[0].Value, &f); err != nil {
		return time.Time{}, b.checkFormat(g.Kvs[0].Value)
	}
	at, err := time.Parse(time.RFC3339, f.CreatedAt)
	if err != nil {
		return time.Time{}, nil
	}
	return at, nil
}

// Format reads the store's format version: 0 when the prefix holds no store.
// Without a deadline in ctx it has the runtime's default
// ([backendkit.WithDeadline]), as every operation does.
func (b *Backend) Format(ctx context.Context) (int, error) {
	ctx, cancel := b.callContext(ctx)
	defer cancel()
	g, err := b.kv.Get(ctx, b.keys.meta())
	if err != nil {
		return 0, b.interpret(ctx, protocol.OpHealth, err)
	}
	if len(g.Kvs) == 0 {
		return 0, nil
	}
	var f formatRecord
	if err := json.Unmarshal(g.Kvs[0].Value, &f); err != nil {
		return 0, b.checkFormat(g.Kvs[0].Value)
	}
	return f.Format, nil
}
