package sqlite_test

import (
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/leasestore/leasestore/audit"
	"github.com/leasestore/leasestore/migrations"
	"github.com/leasestore/leasestore/protocol"
	"github.com/leasestore/leasestore/sqlstore/sqlite"
)

func TestName(t *testing.T) {
	if got := open(t, migratedFile(t), nil).Name(); got != "sqlite" {
		t.Fatalf("Name() = %q, want sqlite", got)
	}
}

// A request replayed after the file was closed and opened again returns
// the original outcome, flagged as a replay, and writes nothing.
func TestReplayAfterReopen(t *testing.T) {
	ctx := ctxT(t)
	path := migratedFile(t)
	clock := newClock()

	first, err := sqlite.Open(ctx, path, sqlite.WithTestClock(nil, clock.Now))
	if err != nil {
		t.Fatal(err)
	}
	rt := protocol.New(first, nil)
	acq := protocol.AcquireRequest{Key: key("job"), Owner: "w1", TTL: time.Minute, RequestID: "acq-1"}
	orig, err := rt.Acquire(ctx, acq)
	if err != nil {
		t.Fatalf("acquire: %v", err)
	}
	ren := protocol.RenewRequest{Key: key("job"), Owner: "w1", Token: orig.Lease.Token, TTL: 2 * time.Minute, RequestID: "ren-1"}
	clock.Advance(time.Second)
	origRenew, err := rt.Renew(ctx, ren)
	if err != nil {
		t.Fatalf("renew: %v", err)
	}
	if err := rt.Close(ctx); err != nil {
		t.Fatal(err)
	}

	clock.Advance(time.Hour) // both leases would be long expired: a replay must not look at them
	second := open(t, path, clock)
	rt2 := protocol.New(second, nil)
	before := auditLen(t, second)

	res, err := rt2.Acquire(ctx, acq)
	if err != nil || !res.Replayed || res.Status != protocol.StatusAcquired {
		t.Fatalf("replayed acquire: %+v, %v; want acquired, replayed", res, err)
	}
	want := *orig.Lease
	if *res.Lease != want {
		t.Fatalf("replayed acquire lease = %+v, want %+v", *res.Lease, want)
	}
	res, err = rt2.Renew(ctx, ren)
	if err != nil || !res.Replayed || res.Status != protocol.StatusRenewed {
		t.Fatalf("replayed renew: %+v, %v; want renewed, replayed", res, err)
	}
	if res.Lease.Token != origRenew.Lease.Token || !res.Lease.ExpiresAt.Equal(origRenew.Lease.ExpiresAt) ||
		!res.Lease.RenewedAt.Equal(origRenew.Lease.RenewedAt) || res.Lease.Owner != "w1" {
		t.Fatalf("replayed renew lease = %+v, want %+v", *res.Lease, *origRenew.Lease)
	}
	// The same id with other parameters is invalid, also after reopening.
	other := acq
	other.TTL = time.Hour
	if res, err := rt2.Acquire(ctx, other); !errors.Is(err, protocol.ErrInvalid) {
		t.Fatalf("reused request id with another ttl: %+v, %v; want invalid", res, err)
	}
	if after := auditLen(t, second); after != before {
		t.Fatalf("audit grew from %d to %d records on replays, want unchanged", before, after)
	}
}

// Tokens keep increasing across closing and reopening the file, whatever
// happened to the previous lease (release, revoke, expiry).
func TestTokensIncreaseAcrossReopen(t *testing.T) {
	ctx := ctxT(t)
	path := migratedFile(t)
	clock := newClock()
	var last int64
	for round := range 4 {
		b, err := sqlite.Open(ctx, path, sqlite.WithTestClock(nil, clock.Now))
		if err != nil {
			t.Fatal(err)
		}
		rt := protocol.New(b, nil)
		for _, name := range []string{"a", "b"} {
			res, err := rt.Acquire(ctx, protocol.AcquireRequest{Key: key(name), Owner: "w", TTL: time.Minute})
			if err != nil {
				t.Fatalf("round %d acquire %s: %v", round, name, err)
			}
			if res.Lease.Token <= last {
				t.Fatalf("round %d: token %d after %d, want strictly more", round, res.Lease.Token, last)
			}
			last = res.Lease.Token
			switch round % 3 {
			case 0:
				_, err = rt.Release(ctx, protocol.ReleaseRequest{Key: key(name), Owner: "w", Token: last})
			case 1:
				_, err = rt.Revoke(ctx, protocol.RevokeRequest{Key: key(name), Actor: "op", Reason: "test", Token: last})
			case 2:
				clock.Advance(time.Minute) // let it expire
			}
			if err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
		}
		if err := rt.Close(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

func auditLen(t *testing.T, r audit.Reader) int {
	t.Helper()
	n, cursor := 0, ""
	for {
		p, err := r.ReadAudit(ctxT(t), audit.Query{Cursor: cursor, Limit: audit.MaxLimit})
		if err != nil {
			t.Fatalf("read audit: %v", err)
		}
		n += len(p.Records)
		if p.NextCursor == "" {
			return n
		}
		cursor = p.NextCursor
	}
}

// rawDB opens a plain connection pool on path, for writing what the backend
// never writes.
func rawDB(t *testing.T, path string) *sql.DB {
	t.Helper()
	db, err := sqlite.OpenDB(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// expectUnavailable checks that err is an *protocol.Error with status
// unavailable whose text contains every one of parts.
func expectUnavailable(t *testing.T, what string, err error, parts ...string) {
	t.Helper()
	expectStatus(t, what, err, protocol.StatusUnavailable, parts...)
}

// expectStatus checks that err is an *protocol.Error with status want
// whose text contains every one of parts.
func expectStatus(t *testing.T, what string, err error, want protocol.Status, parts ...string) {
	t.Helper()
	var pe *protocol.Error
	if !errors.As(err, &pe) || pe.Status != want {
		t.Fatalf("%s: err = %v, want an *protocol.Error with status %s", what, err, want)
	}
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Fatalf("%s: err = %q, want it to mention %q", what, err, p)
		}
	}
}

// A lease row of a format version this release does not know is refused by
// every operation that meets it, and left as it is.
func TestUnknownLeaseVersionRefused(t *testing.T) {
	ctx := ctxT(t)
	path := migratedFile(t)
	clock := newClock()
	b := open(t, path, clock)
	now := clock.Now().UnixMicro()
	db := rawDB(t, path)
	for _, c := range []struct {
		name    string
		expires int64
	}{{"live", now + int64(time.Hour/time.Microsecond)}, {"expired", now - 1}} {
		if _, err := db.ExecContext(ctx, `INSERT INTO leasestore_leases
			(namespace, name, owner, token, acquired_at, renewed_at, expires_at, version)
			VALUES ('ns', ?, 'future', 7, ?, ?, ?, 2)`, c.name, now, now, c.expires); err != nil {
			t.Fatal(err)
		}
	}
	parts := []string{"leasestore_leases", "version 2", "version 1"}
	for _, name := range []string{"live", "expired"} {
		k := key(name)
		_, err := b.Get(ctx, protocol.GetRequest{Key: k, RequestID: "g"})
		expectUnavailable(t, "get "+name, err, parts...)
		_, err = b.Acquire(ctx, protocol.AcquireRequest{Key: k, Owner: "w", TTL: time.Minute, RequestID: "a-" + name})
		expectUnavailable(t, "acquire "+name, err, parts...)
		_, err = b.Renew(ctx, protocol.RenewRequest{Key: k, Owner: "future", Token: 7, TTL: time.Minute, RequestID: "n-" + name})
		expectUnavailable(t, "renew "+name, err, parts...)
		_, err = b.Release(ctx, protocol.ReleaseRequest{Key: k, Owner: "future", Token: 7, RequestID: "l-" + name})
		expectUnavailable(t, "release "+name, err, parts...)
		_, err = b.Revoke(ctx, protocol.RevokeRequest{Key: k, Actor: "op", Reason: "r", RequestID: "v-" + name})
		expectUnavailable(t, "revoke "+name, err, parts...)
	}
	_, err := b.List(ctx, protocol.ListRequest{Namespace: "ns", IncludeExpired: true, RequestID: "l"})
	expectUnavailable(t, "list", err, parts...)

	// Through the runtime the caller sees status unavailable and the reason.
	res, err := protocol.New(b, nil).Get(ctx, protocol.GetRequest{Key: key("live")})
	if res.Status != protocol.StatusUnavailable || !errors.Is(err, protocol.ErrUnavailable) || !strings.Contains(res.Message, "version 2") {
		t.Fatalf("runtime get: %+v, %v; want unavailable naming the version", res, err)
	}

	var n, v int
	if err := db.QueryRowContext(ctx, `SELECT count(*), min(version) FROM leasestore_leases`).Scan(&n, &v); err != nil || n != 2 || v != 2 {
		t.Fatalf("rows after refusals: %d of min version %d, %v; want the 2 rows untouched", n, v, err)
	}
	if got := auditLen(t, b); got != 0 {
		t.Fatalf("audit has %d records, want none", got)
	}
}

// An audit row of an unknown format version is refused by the idempotency
// look-up and by readers of the trail.
func TestUnknownRecordVersionRefused(t *testing.T) {
	ctx := ctxT(t)
	path := migratedFile(t)
	b := open(t, path, newClock())
	db := rawDB(t, path)
	if _, err := db.ExecContext(ctx, `INSERT INTO leasestore_audit
		(at, op, namespace, name, owner, token, request_id, actor, reason, status, version, params_hash, expires_at)
		VALUES (1, 'acquire', 'ns', 'job', 'w', 1, 'rid', 'w', '', 'acquired', 3, 'h', 2)`); err != nil {
		t.Fatal(err)
	}
	parts := []string{"leasestore_audit", "version 3", "version 1"}
	_, err := b.Acquire(ctx, protocol.AcquireRequest{Key: key("job"), Owner: "w", TTL: time.Minute, RequestID: "rid"})
	expectUnavailable(t, "acquire with a recorded request id", err, parts...)
	_, err = b.ReadAudit(ctx, audit.Query{})
	expectUnavailable(t, "read audit", err, parts...)
	if res, err := b.Get(ctx, protocol.GetRequest{Key: key("job"), RequestID: "g"}); err != nil || res.Status != protocol.StatusNotFound {
		t.Fatalf("get after the refused acquire: %+v, %v; want not_found (nothing written)", res, err)
	}
}

// Open and New refuse a file without the schema, with an outdated one or a
// newer one, saying what to do; they never migrate.
func TestSchemaChecked(t *testing.T) {
	ctx := ctxT(t)

	t.Run("missing", func(t *testing.T) {
		path := t.TempDir() + "/missing.db"
		_, err := sqlite.Open(ctx, path, nil)
		expectUnavailable(t, "Open", err, "leasectl migrate up", "migrations.Up", path)
		if _, statErr := os.Stat(path); !errors.Is(statErr, fs.ErrNotExist) {
			t.Fatalf("Open of a missing file left %s behind (stat: %v)", path, statErr)
		}
	})

	t.Run("missing_read_only_uri", func(t *testing.T) {
		// The command the refusal names creates the file: it names the
		// file, not a URI whose mode=ro would refuse to create it.
		path := t.TempDir() + "/missing.db"
		_, err := sqlite.Open(ctx, "file:"+path+"?mode=ro", nil)
		expectUnavailable(t, "Open", err, "leasectl migrate up --dsn sqlite:"+path+"`")
		if _, statErr := os.Stat(path); !errors.Is(statErr, fs.ErrNotExist) {
			t.Fatalf("Open of a missing file left %s behind (stat: %v)", path, statErr)
		}
	})

	t.Run("unmigrated", func(t *testing.T) {
		path := t.TempDir() + "/empty.db"
		db := rawDB(t, path)
		if err := db.PingContext(ctx); err != nil { // creates the empty file
			t.Fatal(err)
		}
		_, err := sqlite.Open(ctx, path, nil)
		expectUnavailable(t, "Open", err, "leasectl migrate up", "migrations.Up", path)
		_, err = sqlite.New(ctx, db, nil)
		expectUnavailable(t, "New", err, "leasectl migrate up")
		var n int
		if err := db.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_schema`).Scan(&n); err != nil || n != 0 {
			t.Fatalf("schema objects after Open and New: %d, %v; want none (no implicit migration)", n, err)
		}
	})
	t.Run("rolled_back", func(t *testing.T) {
		path := migratedFile(t)
		db := rawDB(t, path)
		if _, err := migrations.Down(ctx, migrations.SQLite, db); err != nil {
			t.Fatal(err)
		}
		_, err := sqlite.Open(ctx, path, nil)
		expectUnavailable(t, "Open", err, "leasectl migrate up")
	})
	t.Run("newer", func(t *testing.T) {
		path := migratedFile(t)
		db := rawDB(t, path)
		if _, err := db.ExecContext(ctx, `INSERT INTO `+migrations.VersionTable+` (version_id, is_applied) VALUES (?, 1)`,
			migrations.LatestVersion+1); err != nil {
			t.Fatal(err)
		}
		b, err := sqlite.Open(ctx, path, nil)
		if err != nil {
			t.Fatalf("Open of a newer schema that declares this release can serve it: %v", err)
		}
		_ = b.Close(ctx)
		// A newer schema that this release cannot serve is refused.
		if _, err := db.ExecContext(ctx, `UPDATE leasestore_compat SET oldest_serving_version = ?`,
			migrations.LatestVersion+1); err != nil {
			t.Fatal(err)
		}
		_, err = sqlite.Open(ctx, path, nil)
		expectUnavailable(t, "Open", err, "newer", "upgrade leasestore")
	})
	t.Run("rolled_back_while_open", func(t *testing.T) {
		// A deploy rolled the schema back under a running release:
		// operations refuse it naming both versions and the fix, as
		// Health and Open do, rather than with a bare "no such column".
		path := migratedFile(t)
		b := open(t, path, nil)
		db := rawDB(t, path)
		// One migration back (version 12, the set-aside index and the
		// trail's steps back, gone), two (version 11 changes nothing on
		// SQLite), three (version 10, the trail's time index back), four
		// (version 9 changes nothing on SQLite), five (version 8, the
		// prunes' claims on their request ids, gone) and six (version 7,
		// the marks of what prunes removed, gone): operations go on, and
		// Health and a prune (a read from a cursor too, once the marks are
		// gone) name the versions. Seven back (version 6 changes nothing
		// on SQLite): the same. Eight back (the audit's lock_delay gone):
		// the writes fail; nine back (the leases' lock-delay columns
		// gone): reads too.
		for back := 1; back <= 7; back++ {
			if _, err := migrations.Down(ctx, migrations.SQLite, db); err != nil {
				t.Fatal(err)
			}
			res, err := b.Acquire(ctx, protocol.AcquireRequest{Key: key("x"), Owner: "w", TTL: time.Minute, RequestID: fmt.Sprint("a", back)})
			if err != nil || (res.Status != protocol.StatusAcquired && res.Status != protocol.StatusConflict) {
				t.Fatalf("acquire after rolling back %d migrations: %v, %v", back, res.Status, err)
			}
			want := fmt.Sprintf("schema version %d, this release needs %d", migrations.LatestVersion-back, migrations.LatestVersion)
			expectUnavailable(t, "Health", b.Health(ctx), want)
			_, err = b.PruneAudit(ctx, audit.PruneRequest{Before: time.Now(), Actor: "ops", RequestID: fmt.Sprint("p", back)})
			expectUnavailable(t, "prune", err, want)
			if back >= 6 {
				_, err = b.ReadAudit(ctx, audit.Query{Cursor: audit.EncodeCursor(1)})
				expectUnavailable(t, "audit read from a cursor", err, want)
			}
		}
		for back := 8; back <= 9; back++ {
			if _, err := migrations.Down(ctx, migrations.SQLite, db); err != nil {
				t.Fatal(err)
			}
			want := []string{fmt.Sprintf("schema version %d, this release needs %d", migrations.LatestVersion-back, migrations.LatestVersion),
				"leasectl migrate up"}
			_, err := b.Acquire(ctx, protocol.AcquireRequest{Key: key("x"), Owner: "w", TTL: time.Minute, RequestID: fmt.Sprint("a", back)})
			expectUnavailable(t, "acquire", err, want...)
			if back == 9 {
				_, err = b.Get(ctx, protocol.GetRequest{Key: key("x"), RequestID: "g"})
				expectUnavailable(t, "get", err, want...)
			}
			_, err = b.Revoke(ctx, protocol.RevokeRequest{Key: key("x"), Actor: "op", Reason: "r", RequestID: fmt.Sprint("r", back)})
			expectUnavailable(t, "revoke", err, want...)
		}
	})
	t.Run("dropped_table", func(t *testing.T) {
		// The version table says migrated, but a table is gone: operations
		// fail with the same advice rather than a bare driver error.
		path := migratedFile(t)
		b := open(t, path, nil)
		db := rawDB(t, path)
		if _, err := db.ExecContext(ctx, `DROP TABLE leasestore_leases`); err != nil {
			t.Fatal(err)
		}
		_, err := b.Get(ctx, protocol.GetRequest{Key: key("x"), RequestID: "g"})
		expectUnavailable(t, "get", err, "leasectl migrate up")
	})
}

// New borrows the caller's *sql.DB: closing the backend leaves it open.
func TestNewBorrowsDB(t *testing.T) {
	ctx := ctxT(t)
	path := migratedFile(t)
	db := rawDB(t, path)
	if _, err := sqlite.New(ctx, db, &sqlite.Config{BusyTimeout: time.Second}); err == nil || !strings.Contains(err.Error(), "open it with OpenDB") {
		t.Fatalf("New with a BusyTimeout: %v, want a refusal naming the fix", err)
	}
	b, err := sqlite.New(ctx, db, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(b.File(), "leases.db") {
		t.Fatalf("File() = %q, want the database path", b.File())
	}
	if _, err := b.Acquire(ctx, protocol.AcquireRequest{Key: key("a"), Owner: "w", TTL: time.Minute, RequestID: "r"}); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(ctx); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if err := db.PingContext(ctx); err != nil {
		t.Fatalf("the borrowed *sql.DB was closed: %v", err)
	}
	var n int
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM leasestore_leases`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("rows through the borrowed db: %d, %v; want 1", n, err)
	}
	// The closed backend answers closed, not a panic.
	_, err = b.Get(ctx, protocol.GetRequest{Key: key("a"), RequestID: "g"})
	expectStatus(t, "get after Close", err, protocol.StatusClosed, "closed")
}

// Open owns its *sql.DB: operations after Close answer closed.
func TestOpenOwnsDB(t *testing.T) {
	ctx := ctxT(t)
	b, err := sqlite.Open(ctx, migratedFile(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Health(ctx); err != nil {
		t.Fatalf("health: %v", err)
	}
	if err := b.Close(ctx); err != nil {
		t.Fatal(err)
	}
	_, err = b.Acquire(ctx, protocol.AcquireRequest{Key: key("a"), Owner: "w", TTL: time.Minute, RequestID: "r"})
	expectStatus(t, "acquire after Close", err, protocol.StatusClosed, "closed")
	expectStatus(t, "health after Close", b.Health(ctx), protocol.StatusClosed, "closed")
}

// Names are compared byte-wise; the prefix filter must select exactly the
// names that start with the prefix, multi-byte characters included.
func TestListPrefixBytewise(t *testing.T) {
	ctx := ctxT(t)
	b := open(t, migratedFile(t), newClock())
	rt := protocol.New(b, nil)
	names := []string{"a", "a\u00ff", "a\U0010fff0", "aa", "ab", "b", "é", "é-1", "éa", "\U0001F600", "\U0001F600x", "\u00e9\u0301"}
	for _, n := range names {
		if _, err := rt.Acquire(ctx, protocol.AcquireRequest{Key: key(n), Owner: "w", TTL: time.Minute}); err != nil {
			t.Fatalf("acquire %q: %v", n, err)
		}
	}
	for prefix, want := range map[string][]string{
		"":           {"a", "aa", "ab", "a\u00ff", "a\U0010fff0", "b", "é", "é-1", "éa", "\u00e9\u0301", "\U0001F600", "\U0001F600x"},
		"a":          {"a", "aa", "ab", "a\u00ff", "a\U0010fff0"},
		"é":          {"é", "é-1", "éa", "\u00e9\u0301"},
		"\U0001F600": {"\U0001F600", "\U0001F600x"},
		"ab":         {"ab"},
		"c":          nil,
	} {
		var got []string
		cursor := ""
		for {
			page, err := rt.List(ctx, protocol.ListRequest{Namespace: "ns", Prefix: prefix, Limit: 2, Cursor: cursor})
			if err != nil {
				t.Fatalf("list %q: %v", prefix, err)
			}
			for _, l := range page.Leases {
				got = append(got, l.Key.Name)
			}
			if page.NextCursor == "" {
				break
			}
			cursor = page.NextCursor
		}
		if strings.Join(got, "|") != strings.Join(want, "|") {
			t.Errorf("list prefix %q = %q, want %q", prefix, got, want)
		}
	}
}

func TestReadAuditFilters(t *testing.T) {
	ctx := ctxT(t)
	clock := newClock()
	b := open(t, migratedFile(t), clock)
	rt := protocol.New(b, nil)
	start := clock.Now()
	for i, k := range []protocol.Key{key("a"), key("b"), {Namespace: "other", Name: "a"}} {
		clock.Advance(time.Second)
		if _, err := rt.Acquire(ctx, protocol.AcquireRequest{Key: k, Owner: "w", TTL: time.Minute, RequestID: "acq" + k.Name}); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			if _, err := rt.Revoke(ctx, protocol.RevokeRequest{Key: k, Actor: "op", Reason: "why", RequestID: "rev"}); err != nil {
				t.Fatal(err)
			}
		}
	}
	type want struct {
		q    audit.Query
		recs []string // "namespace/key op"
	}
	for _, c := range []want{
		{audit.Query{}, []string{"ns/a acquire", "ns/a revoke", "ns/b acquire", "other/a acquire"}},
		{audit.Query{Namespace: "ns"}, []string{"ns/a acquire", "ns/a revoke", "ns/b acquire"}},
		{audit.Query{Namespace: "ns", Key: "a"}, []string{"ns/a acquire", "ns/a revoke"}},
		{audit.Query{Namespace: "other", Key: "a"}, []string{"other/a acquire"}},
		{audit.Query{Since: start.Add(2 * time.Second)}, []string{"ns/b acquire", "other/a acquire"}},
		{audit.Query{Namespace: "ns", Key: "a", Since: start.Add(2 * time.Second)}, nil},
	} {
		var got []string
		cursor := ""
		for {
			q := c.q
			q.Limit, q.Cursor = 1, cursor
			p, err := b.ReadAudit(ctx, q)
			if err != nil {
				t.Fatalf("%+v: %v", c.q, err)
			}
			for _, r := range p.Records {
				got = append(got, r.Namespace+"/"+r.Key+" "+string(r.Op))
			}
			if cursor = p.NextCursor; cursor == "" {
				break
			}
		}
		if strings.Join(got, ",") != strings.Join(c.recs, ",") {
			t.Errorf("%+v: got %q, want %q", c.q, got, c.recs)
		}
	}
	p, err := b.ReadAudit(ctx, audit.Query{Namespace: "ns", Key: "a"})
	if err != nil || len(p.Records) != 2 {
		t.Fatal(p, err)
	}
	rev := p.Records[1]
	if rev.Actor != "op" || rev.Reason != "why" || rev.Owner != "w" || rev.Status != protocol.StatusRevoked ||
		rev.Token != p.Records[0].Token || !rev.ExpiresAt.Equal(p.Records[0].ExpiresAt) || rev.Version != audit.RecordFormatVersion {
		t.Fatalf("revoke record = %+v", rev)
	}
	if _, err := b.ReadAudit(ctx, audit.Query{Key: "a"}); !errors.Is(err, protocol.ErrInvalid) {
		t.Fatalf("key without namespace: %v, want invalid", err)
	}
}

// A release already serving a file reads its schema version only at
// Health and when a statement fails, so a migration that stops it from
// serving (raising leasestore_compat's oldest_serving_version) adds
// serving guards, triggers that refuse its writes
// (migrations.ServingGuardPrefix): every change is refused naming both
// versions and the upgrade, and writes nothing.
func TestServingGuardRefusesARunningOlderRelease(t *testing.T) {
	ctx := ctxT(t)
	path := migratedFile(t)
	b := open(t, path, nil)
	held, err := b.Acquire(ctx, protocol.AcquireRequest{Key: key("held"), Owner: "o", TTL: time.Minute, RequestID: "held"})
	if err != nil || held.Status != protocol.StatusAcquired {
		t.Fatalf("acquire before the migration: %v, %v", held.Status, err)
	}
	db := rawDB(t, path)
	// What a migration to version LatestVersion+1 that only later
	// releases serve would do, their leases and records being of format
	// version 99.
	for _, q := range []string{
		fmt.Sprintf(`INSERT INTO %s (version_id, is_applied) VALUES (%d, 1)`, migrations.VersionTable, migrations.LatestVersion+1),
		fmt.Sprintf(`UPDATE leasestore_compat SET oldest_serving_version = %d`, migrations.LatestVersion+1),
		`CREATE TRIGGER ` + migrations.ServingGuardPrefix + `_insert BEFORE INSERT ON leasestore_leases WHEN NEW.version < 99
		 BEGIN SELECT RAISE(ABORT, '` + migrations.ServingGuardPrefix + `: this schema serves releases from version 7 on'); END`,
		`CREATE TRIGGER ` + migrations.ServingGuardPrefix + `_update BEFORE UPDATE ON leasestore_leases WHEN NEW.version < 99
		 BEGIN SELECT RAISE(ABORT, '` + migrations.ServingGuardPrefix + `: this schema serves releases from version 7 on'); END`,
		`CREATE TRIGGER ` + migrations.ServingGuardPrefix + `_audit BEFORE INSERT ON leasestore_audit WHEN NEW.version < 99
		 BEGIN SELECT RAISE(ABORT, '` + migrations.ServingGuardPrefix + `: this schema serves releases from version 7 on'); END`,
	} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	var records int
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM leasestore_audit`).Scan(&records); err != nil {
		t.Fatal(err)
	}
	want := []string{fmt.Sprintf("schema version %d, newer than the %d this release knows", migrations.LatestVersion+1,
		migrations.LatestVersion), "upgrade leasestore"}
	_, err = b.Acquire(ctx, protocol.AcquireRequest{Key: key("new"), Owner: "o", TTL: time.Minute, RequestID: "new"})
	expectUnavailable(t, "acquire", err, want...)
	_, err = b.Renew(ctx, protocol.RenewRequest{Key: key("held"), Owner: "o", Token: held.Lease.Token, TTL: time.Minute, RequestID: "renew"})
	expectUnavailable(t, "renew", err, want...)
	_, err = b.Release(ctx, protocol.ReleaseRequest{Key: key("held"), Owner: "o", Token: held.Lease.Token, RequestID: "release"})
	expectUnavailable(t, "release", err, want...)
	var after, rows int
	if err := db.QueryRowContext(ctx, `SELECT (SELECT count(*) FROM leasestore_audit), (SELECT count(*) FROM leasestore_leases WHERE name = 'new')`).
		Scan(&after, &rows); err != nil {
		t.Fatal(err)
	}
	if after != records || rows != 0 {
		t.Fatalf("the refused changes wrote %d audit records and %d rows of the new key", after-records, rows)
	}
}
