package etcd

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/leasestore/leasestore/backendkit"
	"github.com/leasestore/leasestore/protocol"
)

func (b *Backend) interpret(ctx context.Context, op protocol.Op, err error) error {
	if err != nil && b.cli.Ctx().Err() != nil && (ctx.Err() == nil || errors.Is(context.Cause(ctx), errClientClosed)) {
		// The client's own context ended: it was closed (its calls fail
		// as cancelled, and callContext ends the call's context with
		// errClientClosed), which no retry mends. Once Close has begun (it
		// closes the client of a Backend from Open), the operation ran
		// into Close: closed, as for one begun after it.
		if b.closed.Load() {
			return &protocol.Error{Op: op, Status: protocol.StatusClosed, Message: closedMessage, Err: err}
		}
		msg := "%s: the etcd client was closed"
		if !b.owned {
			msg += ": the client given to New stays the caller's, to keep open until the Backend is closed"
		}
		return backendkit.NewError(op, protocol.StatusUnavailable, err, msg, b.shown)
	}
	return interpretError(ctx, op, b.shown, b.cli.Username != "", err)
}

// interpretError is the one place where this backend turns client and
// server errors into the protocol's: timeout when the operation's deadline
// passed or it was cancelled (the effect of a change is then unknown: a
// retry with the same request id tells), unavailable for everything else
// (no leader, no quorum, a member unreachable, authentication refused), with
// a message naming the cluster and what to do. A refusal of the DSN's user
// or password (authentication failed, no user given) also matches
// [protocol.ErrUnauthenticated], and of its role's permission on the
// store's keys [protocol.ErrForbidden]: no retry mends them (leasectl
// exits 7). "User name is empty" is such a refusal only when the client
// has no user (hasUser false): to a client with one it is the cluster's
// answer while the client authenticates again under a request (its token
// expired, or a member does not know it), which the next try mends. A
// member's refusal to make a watch, which the client passes on as text,
// is read as the client's error of that text (watchRefusal). A
// *protocol.Error passes
// through with op filled in; a tampered audit record, a cluster whose
// revision went back, a store whose revision mark is not below the
// cluster's revision (revision.go) and a prefix that holds no store
// (ErrNoStore: a change's transaction found the format record missing,
// see storeCmp; or a follower saw Destroy delete the trail, errDestroyed)
// are unavailable.
func interpretError(ctx context.Context, op protocol.Op, where string, hasUser bool, err error) error {
	if err == nil {
		return nil
	}
	var pe *protocol.Error
	if errors.As(err, &pe) {
		if pe.Op == "" {
			pe.Op = op
		}
		return pe
	}
	var back *errRevisionBack
	if errors.As(err, &back) {
		return backendkit.NewError(op, protocol.StatusUnavailable, err,
			"%s: the cluster's revision went back: it lost acknowledged writes (restored from a snapshot without --bump-revision, or members restarted from old copies of their data directories), or another cluster answers at its addresses, and would issue fencing tokens already issued; this process refuses every operation until it restarts. Snapshot the cluster ('etcdctl snapshot save') and restore it with 'etcdutl snapshot restore --bump-revision 1000000000 --mark-compacted', then restart the processes that use the store",
			where)
	}
	var behind *errRevisionBehind
	if errors.As(err, &behind) {
		return backendkit.NewError(op, protocol.StatusUnavailable, err,
			"%s: the store's keys were copied here from another cluster (etcdctl make-mirror, or get and put), or the cluster lost acknowledged writes (members restarted from old copies of their data directories, a snapshot restored without --bump-revision) and a process that had seen them wrote since: it would issue fencing tokens already issued. Snapshot this cluster ('etcdctl snapshot save') and restore it with 'etcdutl snapshot restore --bump-revision N --mark-compacted', N above %d: %d is ample; move a store with a snapshot, never by copying its keys",
			where, behind.mark, behind.mark+1_000_000_000)
	}
	var destroyed *errDestroyed
	if errors.As(err, &destroyed) {
		return backendkit.NewError(op, protocol.StatusUnavailable, err,
			"%s: the store was destroyed while it was followed; its trail went with it: follow it again once 'leasectl migrate up' created it anew", where)
	}
	if errors.Is(err, ErrNoStore) {
		return backendkit.NewError(op, protocol.StatusUnavailable, err,
			"%s: no store here: its format record is missing (never created, or destroyed by 'leasectl migrate down --destroy-data'); run 'leasectl migrate up'", where)
	}
	var tampered *errTampered
	if errors.As(err, &tampered) {
		return backendkit.NewError(op, protocol.StatusUnavailable, err, "%s: the audit trail was altered", where)
	}
	if errors.Is(ctx.Err(), context.Canceled) || errors.Is(err, context.Canceled) {
		return backendkit.NewError(op, protocol.StatusTimeout, err, "%s: the caller cancelled the operation before it finished", where)
	}
	if ctx.Err() != nil || errors.Is(err, context.DeadlineExceeded) {
		return backendkit.NewError(op, protocol.StatusTimeout, err, "%s: the deadline passed before the cluster answered", where)
	}
	err = watchRefusal(err)
	switch {
	case errors.Is(err, rpctypes.ErrNoLeader), errors.Is(err, rpctypes.ErrLeaderChanged), errors.Is(err, rpctypes.ErrTimeout),
		errors.Is(err, rpctypes.ErrTimeoutDueToLeaderFail), errors.Is(err, rpctypes.ErrTimeoutDueToConnectionLost):
		return backendkit.NewError(op, protocol.StatusUnavailable, err, "%s: the cluster has no leader or lost quorum; retry with the same request id", where)
	case errors.Is(err, rpctypes.ErrAuthFailed):
		return backendkit.NewError(op, protocol.StatusUnavailable, backendkit.Unauthenticated(err),
			"%s: authentication failed: check the DSN's user and password (etcd://USER:PASSWORD@HOST:PORT/PREFIX, percent-encoded)", where)
	case errors.Is(err, rpctypes.ErrUserEmpty) && hasUser:
		return backendkit.NewError(op, protocol.StatusUnavailable, err,
			"%s: the cluster did not know the client's authentication while the client authenticated again; retry with the same request id", where)
	case errors.Is(err, rpctypes.ErrUserEmpty):
		return backendkit.NewError(op, protocol.StatusUnavailable, backendkit.Unauthenticated(err),
			"%s: the cluster has authentication on and the DSN names no user: give the DSN's user and password (etcd://USER:PASSWORD@HOST:PORT/PREFIX)", where)
	case errors.Is(err, rpctypes.ErrPermissionDenied):
		return backendkit.NewError(op, protocol.StatusUnavailable, backendkit.Forbidden(err), "%s: %s", where, permissionFix)
	case errors.Is(err, rpctypes.ErrInvalidAuthToken):
		// The client fetches a new token and retries by itself; one that
		// still fails is the cluster's trouble (its tokens, a restart).
		return backendkit.NewError(op, protocol.StatusUnavailable, err, "%s: the cluster refused the client's authentication token; retry with the same request id", where)
	case errors.Is(err, rpctypes.ErrNoSpace):
		return backendkit.NewError(op, protocol.StatusUnavailable, err,
			"%s: the cluster refuses changes (NOSPACE alarm: its database reached its quota): compact and defragment it, then run 'etcdctl alarm disarm'", where)
	case errors.Is(err, rpctypes.ErrTooManyOps):
		return backendkit.NewError(op, protocol.StatusUnavailable, err,
			"%s: the cluster refuses transactions this large (its --max-txn-ops): raise it to 128, etcd's default", where)
	case errors.Is(err, rpctypes.ErrCompacted):
		return backendkit.NewError(op, protocol.StatusUnavailable, err, "%s: the revision asked for was compacted", where)
	}
	if s, ok := status.FromError(err); ok {
		switch s.Code() {
		case codes.DeadlineExceeded:
			return backendkit.NewError(op, protocol.StatusTimeout, err, "%s: the deadline passed before the cluster answered", where)
		case codes.Canceled:
			return backendkit.NewError(op, protocol.StatusTimeout, err, "%s: the operation was cancelled", where)
		case codes.Unauthenticated:
			return backendkit.NewError(op, protocol.StatusUnavailable, backendkit.Unauthenticated(err),
				"%s: authentication refused: check the DSN's user and password", where)
		case codes.PermissionDenied:
			return backendkit.NewError(op, protocol.StatusUnavailable, backendkit.Forbidden(err), "%s: %s", where, permissionFix)
		}
	}
	return backendkit.NewError(op, protocol.StatusUnavailable, err, "%s: %s", where, "the cluster could not be reached or refused the operation")
}

// watchRefusal returns the client's error for a cluster's refusal to make
// a watch (permission denied, user name is empty, ...), which the client
// passes on as text only: the member's status error as a string, "rpc
// error: code = PermissionDenied desc = etcdserver: permission denied".
// Any other err is returned as it is.
func watchRefusal(err error) error {
	if _, ok := status.FromError(err); ok {
		return err
	}
	code, desc, ok := strings.Cut(err.Error(), " desc = ")
	if !ok || !strings.HasPrefix(code, "rpc error: code = ") {
		return err
	}
	var known rpctypes.EtcdError
	if mapped := rpctypes.Error(errors.New(desc)); errors.As(mapped, &known) {
		return mapped
	}
	return err
}

// permissionFix is what a refusal for the user's role's permission says:
// the grant that answers it (docs/etcd.md).
const permissionFix = "the DSN's user's role lacks permission on the store's keys: grant it read-write on the prefix " +
	"(etcdctl role grant-permission ROLE readwrite --prefix=true PREFIX; read, for a user that only reads)"

// refusesChanges reports whether err is the cluster refusing a change it
// would read: the user's role may not write, or the NOSPACE alarm.
func refusesChanges(err error) bool {
	return errors.Is(err, rpctypes.ErrPermissionDenied) || errors.Is(err, rpctypes.ErrNoSpace)
}

// errInternal reports an answer of the cluster this backend cannot read: a
// malformed or foreign entry under its prefix.
func errInternal(op protocol.Op, format string, args ...any) error {
	return &protocol.Error{Op: op, Status: protocol.StatusUnavailable, Message: fmt.Sprintf(format, args...)}
}

// errFirstContact is Open's error when no member answered within the dial
// timeout: the client retries failed connections silently, so it probes
// each endpoint once itself, for at most min(dial, 3s) (a TCP connection
// and the TLS handshake the DSN asks for, or a TLS handshake when it asks
// for plain text) and names what it found and the DSN parameter that
// fixes it. The caller's deadline bounds the probe: when it passes first,
// the error is a timeout and names no finding.
func errFirstContact(ctx context.Context, cfg *Config, dial time.Duration, err error) error {
	findings := make([]string, len(cfg.Endpoints))
	var wg sync.WaitGroup
	for i, ep := range cfg.Endpoints {
		wg.Go(func() { findings[i] = probeEndpoint(ctx, ep, cfg.TLS, min(dial, 3*time.Second)) })
	}
	wg.Wait()
	where := "etcd " + strings.Join(cfg.Endpoints, ",")
	if cause := ended(ctx); cause != nil {
		// Findings cut short by the caller (nothing answers there, a
		// handshake that timed out) would blame the endpoints.
		what := "the caller's deadline passed"
		if errors.Is(cause, context.Canceled) {
			what = "the caller cancelled"
		}
		return backendkit.NewError(protocol.OpHealth, protocol.StatusTimeout, cause,
			"%s: no member answered within dial-timeout %v, and %s while the endpoints were probed", where, dial, what)
	}
	var pe *protocol.Error
	if errors.As(err, &pe) && pe.Err != nil {
		err = pe.Err // the client's own error, not the interpreted timeout
	}
	return backendkit.NewError(protocol.OpHealth, protocol.StatusUnavailable, err,
		"%s: no member answered within dial-timeout %v: %s", where, dial, strings.Join(findings, "; "))
}

// probeEndpoint connects to one endpoint as the client would and says
// what went wrong, in words that name the fix.
func probeEndpoint(ctx context.Context, endpoint string, tlsCfg *tls.Config, timeout time.Duration) string {
	host := endpoint
	if _, rest, ok := strings.Cut(endpoint, "://"); ok {
		host = rest
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", host)
	if err != nil {
		return fmt.Sprintf("%s: nothing answers there (%v); check the hosts and ports of the DSN", host, err)
	}
	defer conn.Close()
	defer bindDeadline(ctx, conn)()
	if tlsCfg == nil {
		// Plain text asked for: does the member speak TLS?
		tc := tls.Client(conn, &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12}) //nolint:gosec // a probe that reads nothing
		if tc.HandshakeContext(ctx) == nil {
			return host + ": the member serves TLS; use etcds:// (with cacert=, and cert= and key= when it asks for a client certificate)"
		}
		return host + ": the member accepts connections but did not answer (no leader or no quorum?)"
	}
	cfg := tlsCfg.Clone()
	if cfg.ServerName == "" {
		cfg.ServerName, _, _ = net.SplitHostPort(host)
	}
	tc := tls.Client(conn, cfg)
	if err := tc.HandshakeContext(ctx); err != nil {
		if !provesTLS(err) && speaksPlainHTTP(ctx, host) {
			return host + ": the member speaks plain text, not TLS; use etcd:// without cacert=, cert=, key="
		}
		return host + ": " + tlsFinding(err)
	}
	// With TLS 1.3 a refused client certificate shows on the first read:
	// wait for it half a second, never past ctx's deadline.
	readBy := time.Now().Add(min(timeout, 500*time.Millisecond))
	if deadline, _ := ctx.Deadline(); deadline.Before(readBy) {
		readBy = deadline
	}
	_ = tc.SetReadDeadline(readBy)
	var buf [1]byte
	if _, err := tc.Read(buf[:]); err != nil && !isTimeout(err) && !errors.Is(err, io.EOF) {
		return host + ": " + tlsFinding(err)
	}
	return host + ": the TLS handshake succeeds but the member did not answer (no leader or no quorum?)"
}

// tlsFinding names the fix of a failed TLS handshake.
func tlsFinding(err error) string {
	var unknownCA x509.UnknownAuthorityError
	var hostname x509.HostnameError
	var rec tls.RecordHeaderError
	var op *net.OpError
	switch {
	case errors.As(err, &unknownCA):
		return fmt.Sprintf("the member's certificate is signed by a CA this client does not trust (%v); give that CA as cacert=FILE", err)
	case errors.As(err, &hostname):
		return fmt.Sprintf("the member's certificate is not for this host (%v); connect by a name or address it holds", err)
	case errors.As(err, &rec):
		return "the member speaks plain text, not TLS; use etcd:// without cacert=, cert=, key="
	case errors.As(err, &op) && op.Op == "remote error":
		// An alert from the member: with client certificates required,
		// one is missing or not signed by a CA the member trusts.
		return fmt.Sprintf("the member refused the handshake (%v): it wants a client certificate signed by a CA it trusts; give cert=FILE and key=FILE", err)
	}
	return fmt.Sprintf("the TLS handshake failed (%v)", err)
}

// provesTLS reports whether a failed handshake shows that the peer speaks
// TLS: it sent a certificate the client refused, or an alert.
func provesTLS(err error) bool {
	var verify *tls.CertificateVerificationError
	var op *net.OpError
	return errors.As(err, &verify) || (errors.As(err, &op) && op.Op == "remote error")
}

// speaksPlainHTTP reports whether host answers an HTTP request in plain
// text (an etcd member without TLS closes a TLS handshake without a word).
// A TLS server's answer to plain HTTP ("400 ... to an HTTPS server") is no.
func speaksPlainHTTP(ctx context.Context, host string) bool {
	conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", host)
	if err != nil {
		return false
	}
	defer conn.Close()
	defer bindDeadline(ctx, conn)()
	if _, err := io.WriteString(conn, "GET /version HTTP/1.0\r\n\r\n"); err != nil {
		return false
	}
	answer, _ := io.ReadAll(io.LimitReader(conn, 1024))
	return strings.HasPrefix(string(answer), "HTTP/") && !strings.Contains(string(answer), "HTTPS server")
}

// bindDeadline gives conn ctx's deadline and ends its reads and writes
// when ctx is cancelled, until the returned function is called.
func bindDeadline(ctx context.Context, conn net.Conn) (stop func() bool) {
	deadline, _ := ctx.Deadline()
	_ = conn.SetDeadline(deadline)
	return context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Now()) })
}

// ended returns ctx.Err(), or DeadlineExceeded once ctx's deadline has
// passed but its timer has not yet fired (a connection's deadline, set to
// the same instant, can end a read first).
func ended(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if deadline, ok := ctx.Deadline(); ok && !time.Now().Before(deadline) {
		return context.DeadlineExceeded
	}
	return nil
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
