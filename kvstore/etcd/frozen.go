package etcd

import (
	"context"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
)

// A member can freeze (a paused VM, a network that drops its packets):
// its connections stay open and nothing on them is answered. gRPC's
// keepalive gives up on such a connection only after its ping interval,
// at least 10s, and its timeout; until then the watch of every
// subscription on it hears nothing, so a holder would hear a revoke made
// through the other members only at its renewal. The Backend that owns its
// client (Open) therefore asks for its watch stream's progress while
// subscriptions live (one request per notifyProbe of quiet, answered by
// every member that runs), and when the stream stays silent for
// notifyFrozen it closes the client's connections to that stream's member:
// etcd's client moves the watches (from the revision after the last one
// they received, so no event is missed) and every later call to the
// members that answer, and connects to the frozen one again once it
// answers. The calls then in flight on that member (on a false alarm, a
// loaded member slow to answer, as on a real freeze) are sent again, to
// the members that answer (memberConns.unaryInterceptor), rather than
// answer unavailable. That is safe for every call this backend makes: its
// reads; its grants (a second lease, unused, expires with its TTL); and
// its transactions, whose outcome a cut leaves unknown: a change's
// transaction writes its request id's record and applies only while the
// record is absent, so when the first one applied the second answers the
// record (a replay), and the others compare the revisions they read, so
// the second fails its comparison and the operation reads again.
const (
	notifyProbe  = time.Second
	notifyFrozen = 3 * time.Second
)

// watchTag marks the outgoing metadata of the notifier's watches, so that
// their stream's member is known (memberConns.streamInterceptor).
const watchTag = "leasestore-watch"

// memberConns dials the connections of a client Open makes and keeps them
// by the member's address, so that those of a frozen member can be closed.
type memberConns struct {
	mu    sync.Mutex
	conns map[string]map[net.Conn]struct{} // by remote address
	watch string                           // remote address of the notifier's watch stream
	cut   string                           // remote address of the member cutWatchMember last cut
	cuts  atomic.Uint64                    // how many times cutWatchMember cut a member (read without mu)
}

// dialOptions are the gRPC options that let m see and close the client's
// connections.
func (m *memberConns) dialOptions() []grpc.DialOption {
	return []grpc.DialOption{grpc.WithContextDialer(m.dial), grpc.WithChainStreamInterceptor(m.streamInterceptor),
		grpc.WithChainUnaryInterceptor(m.unaryInterceptor)}
}

// maxCutRetries bounds how often unaryInterceptor sends one call again.
const maxCutRetries = 3

// unaryInterceptor sends a call again when it failed unavailable because
// cutWatchMember closed the connections of its member while it was in
// flight (see notifyFrozen for why that is safe): the client's balancer
// no longer picks that member's connections, so it goes to another.
// etcd's client does not: it retries an unavailable write only when it was
// never sent.
func (m *memberConns) unaryInterceptor(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn,
	invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	opts = opts[:len(opts):len(opts)]
	for attempt := 0; ; attempt++ {
		before := m.cuts.Load() // every call reads it: no lock on the way
		var p peer.Peer
		err := invoker(ctx, method, req, reply, cc, append(opts, grpc.Peer(&p))...)
		if err == nil || attempt == maxCutRetries || ctx.Err() != nil || status.Code(err) != codes.Unavailable {
			return err
		}
		m.mu.Lock()
		cut := m.cuts.Load() != before && (p.Addr == nil || p.Addr.String() == m.cut)
		m.mu.Unlock()
		if !cut {
			return err
		}
	}
}

// dial dials addr as gRPC's own dialer does ("unix:" addresses on a unix
// socket, others over TCP) and keeps the connection until it is closed.
func (m *memberConns) dial(ctx context.Context, addr string) (net.Conn, error) {
	network, address := "tcp", addr
	if rest, ok := strings.CutPrefix(addr, "unix:"); ok {
		network, address = "unix", strings.TrimPrefix(rest, "//")
	}
	c, err := (&net.Dialer{}).DialContext(ctx, network, address)
	if err != nil {
		return nil, err
	}
	tc := &trackedConn{Conn: c, m: m, addr: c.RemoteAddr().String()}
	m.mu.Lock()
	if m.conns == nil {
		m.conns = map[string]map[net.Conn]struct{}{}
	}
	if m.conns[tc.addr] == nil {
		m.conns[tc.addr] = map[net.Conn]struct{}{}
	}
	m.conns[tc.addr][tc] = struct{}{}
	m.mu.Unlock()
	return tc, nil
}

// streamInterceptor records the member of each watch stream the notifier
// opens.
func (m *memberConns) streamInterceptor(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn,
	method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	cs, err := streamer(ctx, desc, cc, method, opts...)
	if err != nil {
		return cs, err
	}
	if md, ok := metadata.FromOutgoingContext(ctx); ok && len(md.Get(watchTag)) > 0 {
		if p, ok := peer.FromContext(cs.Context()); ok && p.Addr != nil {
			m.mu.Lock()
			m.watch = p.Addr.String()
			m.mu.Unlock()
		}
	}
	return cs, err
}

// cutWatchMember closes every connection to the member of the notifier's
// watch stream, and returns its address ("" when none is known).
func (m *memberConns) cutWatchMember() string {
	m.mu.Lock()
	addr := m.watch
	m.cut = addr
	m.cuts.Add(1)
	var conns []net.Conn
	for c := range m.conns[addr] {
		conns = append(conns, c)
	}
	m.mu.Unlock()
	for _, c := range conns {
		_ = c.Close()
	}
	return addr
}

type trackedConn struct {
	net.Conn
	m    *memberConns
	addr string
	once sync.Once
}

func (c *trackedConn) Close() error {
	c.once.Do(func() {
		c.m.mu.Lock()
		delete(c.m.conns[c.addr], c)
		if len(c.m.conns[c.addr]) == 0 {
			delete(c.m.conns, c.addr)
		}
		c.m.mu.Unlock()
	})
	return c.Conn.Close()
}

// subscribed counts a live subscription and starts the prober of the
// watch stream (probeWatches) when none runs; unsubscribed uncounts it.
// Only a Backend that owns its client (b.members set) probes.
func (b *Backend) subscribed() {
	if b.members == nil {
		return
	}
	b.probeMu.Lock()
	defer b.probeMu.Unlock()
	b.subscriptions++
	if !b.probing && b.goTracked(b.probeWatches) {
		b.probing = true
	}
}

func (b *Backend) unsubscribed() {
	if b.members == nil {
		return
	}
	b.probeMu.Lock()
	b.subscriptions--
	b.probeMu.Unlock()
}

// probeWatches runs while subscriptions live: it watches the format record
// on the notifier's watch stream, asks for the stream's progress after
// notifyProbe of quiet, and closes the connections to the stream's member
// when the stream stayed silent for notifyFrozen (see notifyFrozen).
func (b *Backend) probeWatches() {
	ctx, cancel := context.WithCancel(clientv3.WithRequireLeader(b.watching))
	defer cancel()
	watch := func() clientv3.WatchChan { return b.cli.Watch(ctx, b.keys.meta(), clientv3.WithCreatedNotify()) }
	wch := watch()
	heard, pause := time.Now(), notifyPause
	tick := time.NewTicker(notifyProbe / 2)
	defer tick.Stop()
	for {
		select {
		case resp, ok := <-wch:
			heard = time.Now()
			if ok && resp.Err() == nil && !resp.Canceled {
				pause = notifyPause
				continue
			}
			// The watch is over (no leader, a refusal, ...): the
			// subscriptions' watches are made again by their own; so is
			// this one, after a pause (notifyPause doubling to
			// notifyMaxPause while it keeps failing).
			select {
			case <-time.After(pause):
			case <-b.stop:
				return
			case <-ctx.Done():
				return
			}
			pause = min(2*pause, notifyMaxPause)
			wch = watch()
		case <-tick.C:
			b.probeMu.Lock()
			if b.subscriptions == 0 {
				b.probing = false
				b.probeMu.Unlock()
				return
			}
			b.probeMu.Unlock()
			switch quiet := time.Since(heard); {
			case quiet >= notifyFrozen:
				b.members.cutWatchMember()
				heard = time.Now()
			case quiet >= notifyProbe:
				// A failure to ask shows in the watch itself.
				_ = b.cli.RequestProgress(ctx)
			}
		case <-b.stop:
			return
		case <-ctx.Done():
			return
		}
	}
}
