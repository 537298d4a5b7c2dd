package contract

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/leasestore/leasestore/protocol"
)

// operator is what a backend and a runtime both offer: the suite sends the
// same request to each and compares the answers.
type operator interface {
	Acquire(ctx context.Context, req protocol.AcquireRequest) (protocol.Result, error)
	Renew(ctx context.Context, req protocol.RenewRequest) (protocol.Result, error)
	Release(ctx context.Context, req protocol.ReleaseRequest) (protocol.Result, error)
	Revoke(ctx context.Context, req protocol.RevokeRequest) (protocol.Result, error)
	Get(ctx context.Context, req protocol.GetRequest) (protocol.Result, error)
}

// badCall is one request to send to a runtime or a backend, with what the
// direct cases compare: its op, key and request id.
type badCall struct {
	name  string
	op    protocol.Op
	key   protocol.Key
	reqID string
	do    func(o operator) (protocol.Result, error)
}

// badCalls collects calls; its methods add one of each kind.
type badCalls struct {
	e     *env
	calls []badCall
}

func (c *badCalls) acquire(name string, req protocol.AcquireRequest) {
	c.calls = append(c.calls, badCall{"acquire " + name, protocol.OpAcquire, req.Key, req.RequestID,
		func(o operator) (protocol.Result, error) { return o.Acquire(c.e.ctx, req) }})
}

func (c *badCalls) renew(name string, req protocol.RenewRequest) {
	c.calls = append(c.calls, badCall{"renew " + name, protocol.OpRenew, req.Key, req.RequestID,
		func(o operator) (protocol.Result, error) { return o.Renew(c.e.ctx, req) }})
}

func (c *badCalls) release(name string, req protocol.ReleaseRequest) {
	c.calls = append(c.calls, badCall{"release " + name, protocol.OpRelease, req.Key, req.RequestID,
		func(o operator) (protocol.Result, error) { return o.Release(c.e.ctx, req) }})
}

func (c *badCalls) revoke(name string, req protocol.RevokeRequest) {
	c.calls = append(c.calls, badCall{"revoke " + name, protocol.OpRevoke, req.Key, req.RequestID,
		func(o operator) (protocol.Result, error) { return o.Revoke(c.e.ctx, req) }})
}

func (c *badCalls) get(name string, req protocol.GetRequest) {
	c.calls = append(c.calls, badCall{"get " + name, protocol.OpGet, req.Key, req.RequestID,
		func(o operator) (protocol.Result, error) { return o.Get(c.e.ctx, req) }})
}

// okRequests makes valid requests, each with a request id of its own:
// acquires of the free key "fresh", changes of held.
type okRequests struct {
	e    *env
	held protocol.Lease
}

func (ok okRequests) acquire() protocol.AcquireRequest {
	return ok.e.acquireReq("fresh", "w1", leaseTTL)
}

func (ok okRequests) renew() protocol.RenewRequest {
	return protocol.RenewRequest{Key: ok.held.Key, Owner: ok.held.Owner, Token: ok.held.Token, TTL: renewTTL, RequestID: ok.e.rid()}
}

func (ok okRequests) release() protocol.ReleaseRequest {
	return protocol.ReleaseRequest{Key: ok.held.Key, Owner: ok.held.Owner, Token: ok.held.Token, RequestID: ok.e.rid()}
}

func (ok okRequests) revoke() protocol.RevokeRequest {
	return protocol.RevokeRequest{Key: ok.held.Key, Actor: "ops", Reason: "r", RequestID: ok.e.rid()}
}

// invalidRequests returns the requests every store refuses as invalid,
// each with a request id: changes of held (a live lease) and acquires of
// the free key "fresh" with one field out of bounds, and gets of bad keys.
// The Invalid group sends them through runtimes, and directly to the
// backends (directCases).
func (e *env) invalidRequests(held protocol.Lease) []badCall {
	c := &badCalls{e: e}
	ok := okRequests{e, held}
	long := func(n int) string { return strings.Repeat("k", n) }
	badKeys := map[string]protocol.Key{
		"too long name":      e.key(long(protocol.MaxNameLen + 1)),
		"too long namespace": {Namespace: long(protocol.MaxNamespaceLen + 1), Name: "held"},
	}
	for _, b := range badNames {
		badKeys[fmt.Sprintf("name %q", b)] = e.key(b)
		badKeys[fmt.Sprintf("namespace %q", b)] = protocol.Key{Namespace: b, Name: "held"}
	}
	for what, k := range badKeys {
		r := ok.acquire()
		r.Key = k
		c.acquire(what, r)
		rn := ok.renew()
		rn.Key = k
		c.renew(what, rn)
		rl := ok.release()
		rl.Key = k
		c.release(what, rl)
		rv := ok.revoke()
		rv.Key = k
		c.revoke(what, rv)
		c.get(what, protocol.GetRequest{Key: k, RequestID: e.rid()})
	}
	for _, b := range append(badNames[1:], long(protocol.MaxOwnerLen+1)) {
		r := ok.acquire()
		r.Owner = b
		c.acquire(fmt.Sprintf("owner %.20q", b), r)
		rn := ok.renew()
		rn.Owner = b
		c.renew(fmt.Sprintf("owner %.20q", b), rn)
		rl := ok.release()
		rl.Owner = b
		c.release(fmt.Sprintf("owner %.20q", b), rl)
		rv := ok.revoke()
		rv.Actor = b
		c.revoke(fmt.Sprintf("actor %.20q", b), rv)
		r = ok.acquire()
		r.RequestID = b
		c.acquire(fmt.Sprintf("request id %.20q", b), r)
	}
	for _, b := range badNames[1:] {
		rv := ok.revoke()
		rv.Reason = b
		c.revoke(fmt.Sprintf("reason %q", b), rv)
	}
	// An empty owner, actor or reason; an empty request id is replaced by
	// a generated one through a runtime, so it is not in this list.
	r := ok.acquire()
	r.Owner = ""
	c.acquire("empty owner", r)
	rn := ok.renew()
	rn.Owner = ""
	c.renew("empty owner", rn)
	rl := ok.release()
	rl.Owner = ""
	c.release("empty owner", rl)
	rv := ok.revoke()
	rv.Actor = ""
	c.revoke("empty actor", rv)
	rv = ok.revoke()
	rv.Reason = ""
	c.revoke("empty reason", rv)
	rv = ok.revoke()
	rv.Reason = strings.Repeat("r", protocol.MaxReasonLen+1)
	c.revoke("too long reason", rv)
	r = ok.acquire()
	r.RequestID = long(protocol.MaxRequestIDLen + 1)
	c.acquire("too long request id", r)
	for _, ttl := range []time.Duration{0, -time.Second, protocol.MinTTL - time.Microsecond, protocol.MaxTTL + time.Millisecond, 1<<63 - 1} {
		r := ok.acquire()
		r.TTL = ttl
		c.acquire(fmt.Sprintf("ttl %v", ttl), r)
		if ttl != 0 { // a renew without a ttl keeps the lease's own
			rn := ok.renew()
			rn.TTL = ttl
			c.renew(fmt.Sprintf("ttl %v", ttl), rn)
		}
	}
	for _, d := range []time.Duration{-time.Second, protocol.MaxLockDelay + time.Second} {
		r = ok.acquire()
		r.LockDelay = d
		c.acquire(fmt.Sprintf("lock delay %v", d), r)
		r = ok.acquire()
		r.DefaultLockDelay = d
		c.acquire(fmt.Sprintf("default lock delay %v", d), r)
	}
	for _, token := range []int64{0, -1, -held.Token} {
		rn := ok.renew()
		rn.Token = token
		c.renew(fmt.Sprintf("token %d", token), rn)
		rl := ok.release()
		rl.Token = token
		c.release(fmt.Sprintf("token %d", token), rl)
	}
	rv = ok.revoke()
	rv.Token = -1
	c.revoke("token -1", rv)
	return c.calls
}
