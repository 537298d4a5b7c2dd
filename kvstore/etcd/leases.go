package etcd

import (
	"context"
	"errors"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// leasePool hands out etcd leases for liveness entries. A lease that must
// live until at least t is taken from the etcd lease granted for t's
// second with the TTL that reaches it from now, in whole seconds (the
// first operation that needs such a grant makes it; operations wanting the
// same second and TTL share it), so that under load most operations cost
// one transaction and no grant. The TTL is part of the key because a leader
// change renews every etcd lease by its granted TTL: a lease riding on an
// etcd lease granted for a longer lease's TTL would keep its key for that
// TTL after the change, not its own. So an etcd lease serves only
// operations whose own time to their second is within a second of its TTL
// (acquires and renewals with the same TTL), and the grants number about
// one a second for each TTL in use: bounded by time, not by operations.
//
// Safety: a grant asked at local time s with TTL n (the TTL the server
// granted, at least what was asked) expires on the leader no earlier than
// s+n by the leader's clock, which runs at the rate of ours (etcd, like any
// lease, assumes bounded drift, not synchronized clocks); a leader change
// only lengthens it (to n from the change). A lease is used for a wanted
// expiry only when s+n is not before it, so the expires_at a holder is
// told is never after the cluster ends its lease (unless another client
// revokes it: docs/etcd.md). The lease may end up to about two seconds
// later (the second's rounding, the TTL's, and the lessor's expiry checks).
type leasePool struct {
	cli *clientv3.Client

	mu     sync.Mutex
	grants map[slot]*grant
}

// slot names the etcd lease shared by the operations that want to expire
// within the second before sec (Unix seconds) and, when they ask, need a
// TTL of ttl whole seconds to reach it.
type slot struct{ sec, ttl int64 }

type grant struct {
	ready chan struct{} // closed when id and until are set or err
	id    clientv3.LeaseID
	until time.Time // local lower bound of the lease's end
	err   error
}

// forExpiry returns an etcd lease that lives at least until want, and
// until, the local lower bound of its end (not before want). A grant made
// by another caller that failed because that caller's context ended is
// made again (by this caller, or another waiting for it): it says nothing
// of the cluster, and this caller's context may go on.
func (p *leasePool) forExpiry(ctx context.Context, want time.Time) (_ clientv3.LeaseID, until time.Time, _ error) {
	for {
		id, until, mine, err := p.take(ctx, want)
		if err != nil && !mine && ctx.Err() == nil && callerEnded(err) {
			continue
		}
		return id, until, err
	}
}

// callerEnded reports whether err says that the context of the call ended.
func callerEnded(err error) bool {
	switch status.Code(err) {
	case codes.Canceled, codes.DeadlineExceeded:
		return true
	}
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// take is one attempt of forExpiry; mine reports whether this caller made
// the grant (a failed one's error is then its own).
func (p *leasePool) take(ctx context.Context, want time.Time) (_ clientv3.LeaseID, until time.Time, mine bool, _ error) {
	sec := want.Truncate(time.Second)
	if sec.Before(want) {
		sec = sec.Add(time.Second)
	}
	now := time.Now()
	ttl := max(int64((sec.Sub(now)+time.Second-1)/time.Second), 1)
	at := slot{sec: sec.Unix(), ttl: ttl}
	p.mu.Lock()
	if p.grants == nil {
		p.grants = map[slot]*grant{}
	}
	g := p.grants[at]
	if g != nil {
		select {
		case <-g.ready:
			if g.err != nil || g.until.Before(sec) {
				g = nil
			}
		default:
		}
	}
	mine = g == nil
	if mine {
		g = &grant{ready: make(chan struct{})}
		p.grants[at] = g
		p.forget(now)
	}
	p.mu.Unlock()
	if mine {
		sent := time.Now() // not before now: sent+ttl is not before sec
		resp, err := p.cli.Grant(ctx, ttl)
		if err != nil {
			g.err = err
		} else {
			g.id, g.until = resp.ID, sent.Add(time.Duration(resp.TTL)*time.Second)
		}
		close(g.ready)
		if err != nil {
			p.drop(at, g)
			return 0, time.Time{}, true, err
		}
	}
	select {
	case <-g.ready:
	case <-ctx.Done():
		return 0, time.Time{}, mine, ctx.Err()
	}
	if g.err != nil {
		return 0, time.Time{}, mine, g.err
	}
	return g.id, g.until, mine, nil
}

// drop forgets the grant of at when it is g (a failed grant).
func (p *leasePool) drop(at slot, g *grant) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.grants[at] == g {
		delete(p.grants, at)
	}
}

// dropID forgets every grant of lease id.
func (p *leasePool) dropID(id clientv3.LeaseID) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for at, g := range p.grants {
		select {
		case <-g.ready:
			if g.id == id {
				delete(p.grants, at)
			}
		default:
		}
	}
}

// forget removes grants whose second has passed; p.mu is held.
func (p *leasePool) forget(now time.Time) {
	if len(p.grants) < 64 {
		return
	}
	for at := range p.grants {
		if at.sec < now.Unix() {
			delete(p.grants, at)
		}
	}
}
