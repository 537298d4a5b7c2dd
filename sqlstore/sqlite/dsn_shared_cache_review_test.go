package sqlite_test

import (
	"context"
	"database/sql"
	"strings"
	"testing"
	"time"

	"github.com/leasestore/leasestore/protocol"
	"github.com/leasestore/leasestore/sqlstore/sqlite"
)

// TestURISharedCacheReadsNoUncommittedLease: a "file:" URI with
// cache=shared and _pragma=read_uncommitted(1) is taken as it is, and the
// Backend's reads then see another connection's uncommitted writes (any
// connection of the process on the file, the Backend's own batch before it
// commits or fails): Get answers a holder and token that never committed.
// OpenDB pins what would break a guarantee; this should be refused or
// overridden (read_uncommitted off, or cache=shared refused).
func TestURISharedCacheReadsNoUncommittedLease(t *testing.T) {
	path := migratedFile(t)
	b, err := sqlite.Open(ctxT(t), "file:"+path+"?cache=shared&_pragma=read_uncommitted(1)", nil)
	if err != nil {
		t.Logf("Open refused the URI: %v", err) // a refusal is a fix
		return
	}
	t.Cleanup(func() { _ = b.Close(context.Background()) })
	rt := protocol.New(b, nil)
	res, err := rt.Acquire(ctxT(t), protocol.AcquireRequest{Key: key("k"), Owner: "a", TTL: time.Minute})
	wantStatus(t, "acquire", res, err, protocol.StatusAcquired)

	// Another connection of the process begins a change it will not commit.
	raw, err := sql.Open("sqlite", "file:"+path+"?cache=shared&_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = raw.Close() })
	conn, err := raw.Conn(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctxT(t), "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(ctxT(t), "UPDATE leasestore_leases SET owner = 'ghost', token = token + 1000"); err != nil {
		t.Fatal(err)
	}
	g, err := rt.Get(ctxT(t), protocol.GetRequest{Key: key("k")})
	if _, rbErr := conn.ExecContext(context.Background(), "ROLLBACK"); rbErr != nil {
		t.Fatal(rbErr)
	}
	if err == nil && g.Lease != nil && (g.Lease.Owner != "a" || g.Lease.Token != res.Lease.Token) {
		t.Fatalf("get with cache=shared&_pragma=read_uncommitted(1) while another connection held an uncommitted change: "+
			"owner %q token %d, which never committed; want owner %q token %d (the committed lease), or the URI refused",
			g.Lease.Owner, g.Lease.Token, "a", res.Lease.Token)
	}
}

// TestURIReadUncommittedIsRefusedByName: a "file:" URI whose _pragma sets
// read_uncommitted (which lets reads see changes that never commit wherever
// SQLite shares a cache) is refused, naming the pragma; so is cache=shared,
// naming the parameter.
func TestURIReadUncommittedIsRefusedByName(t *testing.T) {
	path := migratedFile(t)
	for _, c := range []struct{ query, want string }{
		{"_pragma=read_uncommitted(1)", "read_uncommitted"},
		{"_pragma=main.READ_UNCOMMITTED=true", "read_uncommitted"},
		{"cache=shared", "cache=shared"},
	} {
		b, err := sqlite.Open(ctxT(t), "file:"+path+"?"+c.query, nil)
		if err == nil {
			_ = b.Close(context.Background())
			t.Errorf("Open with %s: no error; want a refusal naming %s", c.query, c.want)
			continue
		}
		if !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "remove it") {
			t.Errorf("Open with %s: %v; want a refusal naming %s and saying to remove it", c.query, err, c.want)
		}
	}
}
