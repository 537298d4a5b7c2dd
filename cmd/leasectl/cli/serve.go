package cli

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/spf13/cobra"

	"github.com/leasestore/leasestore/audit"
	"github.com/leasestore/leasestore/durations"
	"github.com/leasestore/leasestore/httpapi"
	"github.com/leasestore/leasestore/promobserver"
	"github.com/leasestore/leasestore/protocol"
)

// DefaultListen is where serve listens without --listen.
const DefaultListen = "127.0.0.1:7070"

// EnvAPIToken holds the bearer token leasectl sends to a served store
// (--dsn http://... or https://...).
const EnvAPIToken = "LEASESTORE_API_TOKEN"

// serveJSON is what serve prints on stdout once it listens (JSON mode).
type serveJSON struct {
	Status  string `json:"status"` // "serving"
	URL     string `json:"url"`
	Backend string `json:"backend"`
	Store   string `json:"store"`
	Auth    bool   `json:"auth"` // bearer tokens are required
}

type serveFlags struct {
	listen, tokens, tlsCert, tlsKey string
	maxTimeout, shutdownTimeout     time.Duration
	maxStreams, maxStreamsPerToken  int
	auditRetention                  time.Duration
	lockDelays                      []protocol.NamespaceLockDelay
}

func (a *app) serveCommand() *cobra.Command {
	var f serveFlags
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Serve the store over HTTP/JSON (the HTTP API)",
		Long: `Serve the store named by --dsn over HTTP/JSON: the routes of DESIGN.md's HTTP
API (POST /v1/acquire, /v1/renew, /v1/release, /v1/revoke, /v1/renew-many;
GET /v1/leases/..., /v1/namespaces, /v1/audit, and the event streams
/v1/audit/follow and /v1/notify/...; /healthz, /readyz, /metrics,
/openapi.json). Other leasectl commands, and Go programs through
httpapi.Client, reach it with --dsn http://HOST:PORT (or https://), sending
$` + EnvAPIToken + ` as the bearer token.

--tokens FILE names the bearer tokens, one a line:
  TOKEN ROLE NS-GLOB[,NS-GLOB...]
TOKEN is the token itself (16 characters at least) or sha256:HEX of it; ROLE is
reader (get, list, audit), writer (and acquire, renew, release) or admin (and
revoke); each NS-GLOB is a namespace glob, matching a whole namespace: *
matches any run of characters, / included; ? any one character; [...] one
of a class ([0-3], [^0-9]); \ quotes the next character (\*); anything else
itself. Only * reads the audit trail of every namespace at once; a malformed
glob is refused. # starts a comment wherever it stands (team#1 is the glob
team); \# puts a # into a field (team\#1 names the namespace team#1; in a
token, \# is #); a UTF-8 byte order mark at the start of the file is skipped;
a file over 16 MiB is refused. SIGHUP reloads
the file; a file that does not parse is refused and the tokens
in force stay. Streams (notify, audit follow) of a token the reload removed, or
narrowed so that it may no longer read the stream's namespace, end at once.

Slow clients are cut off: headers must arrive within 10s (over HTTP/2, whose
server has no such bound, a connection is cut after 2m idle), a body within
10s of the request. Streams are capped per server (--max-streams, then 503) and
per token (--max-streams-per-token, then 429). Error bodies never name the
database's user, name or address: the cause goes to the server's log. Without --tokens every request may do everything, so serve
refuses to listen on anything but a loopback address.

With --tls-cert and --tls-key serve speaks HTTPS (HTTP/1.1 and HTTP/2);
without, plain HTTP/1.1 and HTTP/2 (prior knowledge). At start, a pair
that does not load, or a certificate that expired or is not valid yet, is
refused (exit 2), naming the file and its date. SIGHUP reloads the pair too
(after rotating both files in place): new handshakes get the new pair once
it loads, matches and is valid; otherwise the error is logged, naming the
file, and the pair in force stays. A certificate in use that expires is
logged (error level, once, naming the file and its NotAfter). Clients
trust a certificate of a private CA named in their DSN
(--dsn https://HOST:PORT?cacert=CA.pem), through SSL_CERT_FILE=CA.pem
(Linux) or in the system's trust store (macOS, Windows).

--lock-delay NS=DURATION (repeatable) sets a namespace default of the
lock-delay: an acquire (or run) in a namespace that the namespace glob NS
matches (as in the tokens file: jobs-*, billing, * for all), asking for no
lock-delay of its own, gets DURATION (0 to 1h; 0 for none), the first matching flag
applying: --lock-delay billing=0s --lock-delay '*=15s' gives every
namespace but billing 15s. An entry that can never apply is refused
(exit 2): a glob given twice, a namespace an earlier glob matches, and
any entry after '*'. After such a lease is revoked or runs out,
acquires of its key answer conflict until the delay has passed.

SIGINT or SIGTERM stops serve gracefully: it stops accepting connections,
lets requests in flight finish (up to --shutdown-timeout), then closes the
store, and exits 0.`,
		Example: `  leasectl serve --dsn postgres://leasestore@db/leases --listen 0.0.0.0:7070 --tokens /etc/leasestore/tokens
  leasectl serve --dsn sqlite:/var/lib/leasestore/leases.db
  LEASESTORE_API_TOKEN=... leasectl list --dsn http://leases.internal:7070 -n billing`,
		Args: exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error { return a.serve(cmd, f) },
	}
	fl := cmd.Flags()
	fl.StringVar(&f.listen, "listen", DefaultListen, "address to listen on, HOST:PORT (port 0: any free port)")
	fl.StringVar(&f.tokens, "tokens", "", "bearer tokens file (required to listen beyond loopback)")
	fl.StringVar(&f.tlsCert, "tls-cert", "", "TLS certificate file (PEM), with --tls-key")
	fl.StringVar(&f.tlsKey, "tls-key", "", "TLS private key file (PEM), with --tls-cert")
	fl.Var(newDurationFlag(&f.maxTimeout, httpapi.DefaultMaxTimeout, positive, 0), "max-timeout", "longest deadline a request may ask for (Request-Timeout header)")
	fl.Var(newDurationFlag(&f.shutdownTimeout, 30*time.Second, positive, 0), "shutdown-timeout", "how long requests in flight may take to finish on shutdown")
	intVar(fl, &f.maxStreams, "max-streams", httpapi.DefaultMaxStreams, "streams (notify, audit follow) open at once; one more is answered 503 (-1: no bound)")
	intVar(fl, &f.maxStreamsPerToken, "max-streams-per-token", httpapi.DefaultMaxStreamsPerToken,
		"streams open at once with one bearer token; one more is answered 429 (-1: no bound)")
	fl.Var(newZeroDurationFlag(&f.auditRetention, 0, 0), "audit-retention",
		"keep audit records this long (30d, 720h): older ones are pruned in the background, at once and then every tenth of it (at most hourly); 0 keeps everything; negative is refused")
	fl.Var(lockDelaysFlag{&f.lockDelays}, "lock-delay",
		"namespace default of the lock-delay (repeatable, the first match applies): an acquire in a namespace the glob NS matches (jobs-*, billing, *) that asks for none gets DURATION (0 to 1h)")
	return cmd
}

// loopback reports whether host (of --listen) can only be reached from
// this machine: localhost or a loopback IP. An empty host listens on
// every interface.
func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func (a *app) serve(cmd *cobra.Command, f serveFlags) error {
	host, port, err := net.SplitHostPort(f.listen)
	if err != nil {
		return usageError("--listen: %q is not HOST:PORT", f.listen)
	}
	// The port is read as net.Listen will read it (a number from 0 to
	// 65535, or a service name of /etc/services), before the store is
	// opened: one no listener can have is bad input, not an outage.
	if _, err := net.DefaultResolver.LookupPort(cmd.Context(), "tcp", port); err != nil {
		return usageError("--listen %s: %v", f.listen, err)
	}
	if (f.tlsCert == "") != (f.tlsKey == "") {
		return usageError("--tls-cert and --tls-key go together")
	}
	if f.maxStreams == 0 || f.maxStreams < -1 || f.maxStreamsPerToken == 0 || f.maxStreamsPerToken < -1 {
		return usageError("--max-streams and --max-streams-per-token: want a positive number, or -1 for no bound")
	}
	var tokens atomic.Pointer[httpapi.Tokens]
	if f.tokens != "" {
		t, err := httpapi.LoadTokens(f.tokens)
		if err != nil {
			return &failure{status: string(protocol.StatusInvalid), err: err}
		}
		tokens.Store(t)
	} else if !loopback(host) {
		return usageError("--listen %s: without --tokens every request may do everything, so serve listens only on "+
			"loopback (127.0.0.1, ::1, localhost); give --tokens FILE to listen there", f.listen)
	}
	var tlsConfig *tls.Config
	var certs *servingCert
	if f.tlsCert != "" {
		if certs, err = newServingCert(f.tlsCert, f.tlsKey, a.log, time.Now()); err != nil {
			return err
		}
		tlsConfig = &tls.Config{GetCertificate: certs.getCertificate, MinVersion: tls.VersionTLS12}
	}
	t, err := a.target()
	if err != nil {
		return err
	}
	if t.remote {
		return usageError("serve: --dsn %s is itself a served store: give serve the database's DSN (postgres://... or sqlite:PATH)", t.shown)
	}

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	observer, err := promobserver.New(reg)
	if err != nil {
		return failWith(err)
	}
	s, err := a.openTarget(cmd.Context(), t, openOptions{observer: observer, lockDelays: f.lockDelays})
	if err != nil {
		return err
	}
	defer s.close(a)
	if f.auditRetention > 0 {
		stopRetention, err := a.startRetention(cmd.Context(), s, f.auditRetention)
		if err != nil {
			return err
		}
		defer stopRetention() // before the store closes
	}
	h, err := httpapi.NewHandler(s.rt, s.audit, &httpapi.Config{
		DefaultTimeout: a.timeout, MaxTimeout: f.maxTimeout, Logger: a.log, Tokens: tokens.Load, Registry: reg,
		MaxStreams: f.maxStreams, MaxStreamsPerToken: f.maxStreamsPerToken,
		// Without tokens serve listens on loopback only, and answers only
		// requests addressed there (no DNS rebinding).
		LoopbackOnly: f.tokens == "",
	})
	if err != nil {
		return failWith(err)
	}
	// SIGHUP is caught before the server answers anyone: by default it
	// would end the process, and an operator may send it as soon as the
	// server serves.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	l, err := net.Listen("tcp", f.listen)
	if err != nil {
		return fail(protocol.StatusUnavailable, "serve: listen: %v", err)
	}
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		TLSConfig:         tlsConfig,
		ErrorLog:          slog.NewLogLogger(a.log.Handler(), slog.LevelWarn),
		BaseContext:       func(net.Listener) context.Context { return context.WithoutCancel(cmd.Context()) },
	}
	// Notification streams last until their clients go away: Shutdown
	// ends them (each client reconnects, to this server's successor).
	srv.RegisterOnShutdown(h.CloseStreams)
	srv.Protocols = new(http.Protocols)
	srv.Protocols.SetHTTP1(true)
	if tlsConfig != nil {
		srv.Protocols.SetHTTP2(true)
	} else {
		srv.Protocols.SetUnencryptedHTTP2(true)
	}
	scheme := "http"
	if tlsConfig != nil {
		scheme = "https"
	}
	url := scheme + "://" + l.Addr().String()

	served := make(chan error, 1)
	go func() {
		if tlsConfig != nil {
			served <- srv.ServeTLS(l, "", "")
		} else {
			served <- srv.Serve(l)
		}
	}()
	a.log.Info("serving", "url", url, "backend", s.backend, "store", s.shown, "auth", f.tokens != "")
	if len(f.lockDelays) > 0 {
		a.log.Info("namespace defaults of the lock-delay", "lock_delays", lockDelaysFlag{&f.lockDelays}.String())
	}
	if a.output == "json" {
		a.printJSON(serveJSON{Status: "serving", URL: url, Backend: s.backend, Store: s.shown, Auth: f.tokens != ""})
	} else {
		a.printText(fmt.Sprintf("serving the %s store %s at %s (Ctrl-C to stop)\n", s.backend, s.shown, url))
	}

	// The certificate in force is checked once it expires, so that its
	// expiry shows in the log before clients report it.
	var expired <-chan time.Time
	expiry := time.NewTimer(time.Hour)
	defer expiry.Stop()
	checkAt := func(d time.Duration, ok bool) {
		expired = nil
		if ok {
			expiry.Reset(d)
			expired = expiry.C
		}
	}
	if certs != nil {
		checkAt(certs.untilExpiry(time.Now()), true)
	}
	for {
		select {
		case err := <-served:
			return fail(protocol.StatusUnavailable, "serve: %v", err)
		case <-expired:
			checkAt(certs.checkExpiry(time.Now()))
			continue
		case <-hup:
			// The certificate first: its reload is done once the
			// tokens' is logged.
			if certs != nil && certs.reload() {
				checkAt(certs.untilExpiry(time.Now()), true)
			}
			if (f.tokens != "" || certs == nil) && a.reloadTokens(f.tokens, &tokens) {
				h.TokensReloaded() // streams of removed or narrowed tokens end
			}
			continue
		case <-cmd.Context().Done():
		}
		break
	}
	a.log.Info("shutting down: finishing requests in flight", "timeout", durations.Format(f.shutdownTimeout))
	ctx, cancel := context.WithTimeout(context.Background(), f.shutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		a.log.Warn("shutdown: requests still in flight were cut off", "err", err)
		_ = srv.Close()
	}
	if err := <-served; err != nil && !errors.Is(err, http.ErrServerClosed) {
		a.log.Warn("serve", "err", err)
	}
	a.log.Info("stopped; closing the store")
	return nil
}

// startRetention prunes s's audit trail of records older than keep in the
// background (audit.Retain) until the returned stop is called; stop waits
// for a prune in progress to end.
func (a *app) startRetention(ctx context.Context, s *store, keep time.Duration) (stop func(), err error) {
	p := storePruner{s}
	if _, ok := s.rt.Backend().(audit.Pruner); !ok { // a check, not a prune: the metrics hear of none
		return nil, usageError("--audit-retention: the %s store cannot prune its audit trail", s.backend)
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = audit.Retain(ctx, p, audit.RetainConfig{Keep: keep, Logger: a.log})
	}()
	a.log.Info("audit retention", "keep", durations.Format(keep))
	return func() { cancel(); <-done }, nil
}

// storePruner prunes through the store's runtime (its deadline and
// observer), as audit prune does.
type storePruner struct{ s *store }

func (p storePruner) PruneAudit(ctx context.Context, r audit.PruneRequest) (res audit.PruneResult, err error) {
	_, err = through(ctx, p.s, audit.OpPrune, func(ctx context.Context, pr audit.Pruner) (err error) {
		res, err = pr.PruneAudit(ctx, r)
		return err
	})
	return res, err
}

// reloadTokens reads the tokens file again and reports whether it did; on
// failure the tokens in force stay.
func (a *app) reloadTokens(path string, tokens *atomic.Pointer[httpapi.Tokens]) bool {
	if path == "" {
		a.log.Warn("SIGHUP: nothing to reload (no --tokens, no --tls-cert)")
		return false
	}
	t, err := httpapi.LoadTokens(path)
	if err != nil {
		a.log.Error("SIGHUP: the tokens file does not load; the tokens in force stay", "err", err)
		return false
	}
	tokens.Store(t)
	a.log.Info("SIGHUP: tokens reloaded", "file", path, "tokens", t.Len())
	return true
}
