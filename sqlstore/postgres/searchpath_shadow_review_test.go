package postgres_test

import (
	"testing"
	"time"

	"github.com/leasestore/leasestore/internal/testkit/pgtest"
	"github.com/leasestore/leasestore/migrations"
	"github.com/leasestore/leasestore/protocol"
)

// TestASchemaCreatedEarlierInTheSearchPathSplitsNoStore: the DSN's
// search_path names a schema before the store's that does not exist yet
// (the default search_path, "$user", public, is the common case: a store
// in public, and the role's own schema not created). A DBA creates that
// schema (CREATE SCHEMA AUTHORIZATION app, as PostgreSQL's docs advise),
// and the next deploy runs `migrate up` as every deploy does: it migrates
// a second, empty store into the new first schema, with a fencing
// sequence that starts again at 1, and the running backend's statements
// now resolve there. A lease held in the store is acquired again by
// another owner, and a released key's token is issued again. Health says
// nothing. Either migrate up must refuse to create a store while a
// schema of the search_path already holds one, or the backend must keep
// to the schema it opened (and Health refuse the change): the two stores
// must never both serve.
func TestASchemaCreatedEarlierInTheSearchPathSplitsNoStore(t *testing.T) {
	t.Parallel()
	dsn, _, first, admin := schemaBeforeTheStore(t)

	b := openBackend(t, dsn, nil)
	key := keysIn(pgtest.Namespace())
	held, err := b.Acquire(ctxT(t), protocol.AcquireRequest{Key: key("held"), Owner: "o", TTL: time.Hour, RequestID: "a-held"})
	wantStatus(t, "acquire held", held, err, protocol.StatusAcquired)
	gone, err := b.Acquire(ctxT(t), protocol.AcquireRequest{Key: key("gone"), Owner: "o", TTL: time.Hour, RequestID: "a-gone"})
	wantStatus(t, "acquire gone", gone, err, protocol.StatusAcquired)
	res, err := b.Release(ctxT(t), protocol.ReleaseRequest{Key: key("gone"), Owner: "o", Token: gone.Lease.Token,
		RequestID: "r-gone"})
	wantStatus(t, "release gone", res, err, protocol.StatusReleased)

	mustExec(t, admin, "CREATE SCHEMA "+first) // the DBA
	if _, err := migrations.Up(ctxT(t), migrations.Postgres, sqlDB(t, dsn)); err != nil {
		t.Logf("migrate up refused: %v", err) // a refusal is a fix
	}

	again, err := b.Acquire(ctxT(t), protocol.AcquireRequest{Key: key("held"), Owner: "other", TTL: time.Hour,
		RequestID: "a-held-other"})
	if err == nil && again.Status == protocol.StatusAcquired {
		t.Errorf("a lease held by o until %s was acquired by another owner with token %d after the DBA's schema "+
			"and a migrate up (health: %v)", held.Lease.ExpiresAt.Format(time.RFC3339), again.Lease.Token, b.Health(ctxT(t)))
	}
	next, err := b.Acquire(ctxT(t), protocol.AcquireRequest{Key: key("gone"), Owner: "o2", TTL: time.Hour,
		RequestID: "a-gone-again"})
	if err == nil && next.Status == protocol.StatusAcquired && next.Lease.Token <= gone.Lease.Token {
		t.Errorf("the released key got token %d again; it had token %d", next.Lease.Token, gone.Lease.Token)
	}
}
