package protocol_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/leasestore/leasestore/memstore"
	"github.com/leasestore/leasestore/protocol"
)

// TestListCursorOfAnotherListIsRefused: a cursor names the lease a page
// ended at, so given to a list of another namespace (or other filters) it
// would start that list after the name and leave out the leases before it
// without a word. The Go API's lists answered such a cursor with a page
// (the HTTP API already refused it); the Runtime now binds the cursors it
// answers to their list and refuses them, invalid, for any other, while
// the list that gave one pages on with it.
func TestListCursorOfAnotherListIsRefused(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	store := protocol.New(memstore.New(nil), nil)
	defer store.Close(context.Background())
	for _, ns := range []string{"a", "b"} {
		for _, name := range []string{"k1", "k2", "k3"} {
			if res, err := store.Acquire(ctx, protocol.AcquireRequest{Key: protocol.Key{Namespace: ns, Name: name},
				Owner: "o", TTL: time.Minute}); err != nil || res.Status != protocol.StatusAcquired {
				t.Fatalf("acquire %s/%s: %+v, %v", ns, name, res, err)
			}
		}
	}
	first, err := store.List(ctx, protocol.ListRequest{Namespace: "a", Limit: 1})
	if err != nil || first.NextCursor == "" {
		t.Fatalf("list a, limit 1: %+v, %v", first, err)
	}
	next, err := store.List(ctx, protocol.ListRequest{Namespace: "a", Limit: 1, Cursor: first.NextCursor})
	if err != nil || len(next.Leases) != 1 || next.Leases[0].Key.Name != "k2" {
		t.Fatalf("list a after its first page: %+v, %v; want k2", next, err)
	}
	for name, req := range map[string]protocol.ListRequest{
		"another namespace": {Namespace: "b", Cursor: first.NextCursor},
		"another prefix":    {Namespace: "a", Prefix: "k", Cursor: first.NextCursor},
		"another owner":     {Namespace: "a", Owner: "o", Cursor: first.NextCursor},
		"include expired":   {Namespace: "a", IncludeExpired: true, Cursor: first.NextCursor},
	} {
		res, err := store.List(ctx, req)
		if !errors.Is(err, protocol.ErrInvalid) || res.Status != protocol.StatusInvalid || !strings.Contains(res.Message, "another list") {
			t.Errorf("list (%s) with a cursor of namespace a's list: %d leases, status %q, %q, %v; want invalid naming another list",
				name, len(res.Leases), res.Status, res.Message, err)
		}
	}
}
