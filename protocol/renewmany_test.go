package protocol

import (
	"context"
	"errors"
	"sync"
	"testing"
)

// bulkBackend is a fakeBackend that also renews in bulk through bulk.
type bulkBackend struct {
	fakeBackend
	bulk func(ctx context.Context, reqs []RenewRequest) ([]Result, error)
}

func (b *bulkBackend) RenewMany(ctx context.Context, reqs []RenewRequest) ([]Result, error) {
	return b.bulk(ctx, reqs)
}

var _ BulkRenewer = (*bulkBackend)(nil)

func renewReqs(names ...string) []RenewRequest {
	out := make([]RenewRequest, len(names))
	for i, n := range names {
		out[i] = RenewRequest{Key: Key{Namespace: "ns", Name: n}, Owner: "w", Token: 3, TTL: DefaultTimeout}
	}
	return out
}

// Without a BulkRenewer, RenewMany renews one lease at a time: an invalid
// request answers invalid and is never sent, the others get request ids,
// one failure stays in its own result, and every renewal is observed.
func TestRenewManyFallsBackToRenew(t *testing.T) {
	b := &fakeBackend{handle: func(ctx context.Context, op Op, req any) (Result, error) {
		if r := req.(RenewRequest); r.Key.Name == "down" {
			return Result{}, newError(op, StatusUnavailable, nil, "down")
		}
		return defaultAnswer(op, req), nil
	}}
	var (
		mu     sync.Mutex
		events []OperationEvent
	)
	rt := New(b, &Config{Observer: ObserverFunc(func(_ context.Context, ev OperationEvent) {
		mu.Lock()
		defer mu.Unlock()
		events = append(events, ev)
	})})
	defer rt.Close(context.Background())
	reqs := renewReqs("a", "bad", "down", "c")
	reqs[1].Owner = ""
	res, err := rt.RenewMany(context.Background(), reqs)
	if err != nil {
		t.Fatal(err)
	}
	want := []Status{StatusRenewed, StatusInvalid, StatusUnavailable, StatusRenewed}
	for i, r := range res {
		if r.Status != want[i] || r.Op != OpRenew || r.RequestID == "" || r.Message == "" {
			t.Fatalf("result %d: %+v, want %s with a request id and a message", i, r, want[i])
		}
	}
	calls := b.callList()
	if len(calls) != 3 {
		t.Fatalf("%d calls, want 3 (the invalid request is not sent)", len(calls))
	}
	for _, c := range calls {
		if c.req.(RenewRequest).RequestID == "" || !c.hasDeadline {
			t.Fatalf("call %+v: want a request id and a deadline", c)
		}
	}
	if len(events) != 4 {
		t.Fatalf("%d events, want 4", len(events))
	}
}

// With a BulkRenewer, one call carries every valid request; a call that
// fails as a whole answers its status for every request sent, and the
// error; a wrong number of results is unavailable.
func TestRenewManyBulk(t *testing.T) {
	calls := 0
	b := &bulkBackend{bulk: func(ctx context.Context, reqs []RenewRequest) ([]Result, error) {
		calls++
		out := make([]Result, len(reqs))
		for i, r := range reqs {
			if r.RequestID == "" {
				t.Errorf("request %d sent without an id", i)
			}
			out[i] = defaultAnswer(OpRenew, r)
		}
		return out, nil
	}}
	rt := New(b, nil)
	defer rt.Close(context.Background())
	reqs := renewReqs("a", "b", "bad")
	reqs[2].TTL = -1
	res, err := rt.RenewMany(context.Background(), reqs)
	if err != nil || calls != 1 || res[0].Status != StatusRenewed || res[1].Status != StatusRenewed || res[2].Status != StatusInvalid {
		t.Fatalf("%d calls: %+v %v", calls, res, err)
	}
	if len(b.callList()) != 0 {
		t.Fatal("Renew called although the backend renews in bulk")
	}

	b.bulk = func(context.Context, []RenewRequest) ([]Result, error) {
		return nil, newError(OpRenew, StatusUnavailable, errors.New("gone"), "postgres: gone")
	}
	res, err = rt.RenewMany(context.Background(), renewReqs("a", "b"))
	if !errors.Is(err, ErrUnavailable) || res[0].Status != StatusUnavailable || res[1].Status != StatusUnavailable {
		t.Fatalf("failed call: %+v %v", res, err)
	}
	b.bulk = func(context.Context, []RenewRequest) ([]Result, error) { return []Result{{Status: StatusRenewed}}, nil }
	res, err = rt.RenewMany(context.Background(), renewReqs("a", "b"))
	if !errors.Is(err, ErrUnavailable) || res[0].Status != StatusUnavailable {
		t.Fatalf("short answer: %+v %v", res, err)
	}
}

// A closed runtime answers closed for every request.
func TestRenewManyClosed(t *testing.T) {
	rt := New(&fakeBackend{}, nil)
	_ = rt.Close(context.Background())
	res, err := rt.RenewMany(context.Background(), renewReqs("a", "b"))
	if !errors.Is(err, ErrClosed) || res[0].Status != StatusClosed || res[1].Status != StatusClosed {
		t.Fatalf("%+v %v", res, err)
	}
}

// RenewMany does not write the request ids it makes into the caller's
// slice: a caller that renews the same slice every round sends a fresh id
// each round, as Renew does, instead of a replay of the first round that
// changes nothing while it answers renewed.
func TestRenewManyLeavesTheCallersRequestsAlone(t *testing.T) {
	b := &fakeBackend{handle: func(ctx context.Context, op Op, req any) (Result, error) { return defaultAnswer(op, req), nil }}
	rt := New(b, nil)
	defer rt.Close(context.Background())
	reqs := renewReqs("a", "b")
	for round := range 2 {
		res, err := rt.RenewMany(context.Background(), reqs)
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range res {
			if r.RequestID == "" {
				t.Fatalf("round %d, result %d: no request id", round, i)
			}
		}
	}
	calls := b.callList()
	if len(calls) != 4 {
		t.Fatalf("%d calls, want 4", len(calls))
	}
	for i := range 2 {
		first, second := calls[i].req.(RenewRequest).RequestID, calls[2+i].req.(RenewRequest).RequestID
		if first == second {
			t.Fatalf("request %d went out with request id %q in both rounds: the second is a replay", i, first)
		}
	}
	for i, r := range reqs {
		if r.RequestID != "" {
			t.Fatalf("request %d: RenewMany wrote request id %q into the caller's slice", i, r.RequestID)
		}
	}
}
