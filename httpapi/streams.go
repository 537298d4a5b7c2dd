package httpapi

import (
	"crypto/sha256"
	"fmt"
	"net/http"
	"strings"
	"sync"

	"github.com/leasestore/leasestore/protocol"
)

// StatusTooManyStreams answers a stream (notify, audit follow) that would
// pass [Config].MaxStreamsPerToken: HTTP 429.
const StatusTooManyStreams protocol.Status = "too_many_streams"

// streamLimits counts the streams open on a handler, in all and per
// bearer token (by the token's SHA-256, so a reload that keeps a token
// keeps its count).
type streamLimits struct {
	max, perToken int // <= 0: no bound

	mu      sync.Mutex
	total   int
	byToken map[[sha256.Size]byte]int
}

func newStreamLimits(max, perToken int) streamLimits {
	if max == 0 {
		max = DefaultMaxStreams
	}
	if perToken == 0 {
		perToken = DefaultMaxStreamsPerToken
	}
	return streamLimits{max: max, perToken: perToken, byToken: make(map[[sha256.Size]byte]int)}
}

// openStream counts a stream of x's caller, or answers 429 or 503 and
// returns false when a cap is reached. The caller calls the returned
// function when the stream ends.
func (h *Handler) openStream(x *exchange, sh shape) (func(), bool) {
	l := &h.streams
	authed := x.token != ""
	id := sha256.Sum256([]byte(x.token))
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case authed && l.perToken > 0 && l.byToken[id] >= l.perToken:
		h.refusal(x, StatusTooManyStreams, http.StatusTooManyRequests, fmt.Sprintf("%s: this token has %d streams open, "+
			"the most one token may (leasectl serve --max-streams-per-token): close one, or wait by polling", x.route, l.perToken), sh)
		return nil, false
	case l.max > 0 && l.total >= l.max:
		h.refusal(x, protocol.StatusUnavailable, http.StatusServiceUnavailable, fmt.Sprintf("%s: the server has %d streams open, "+
			"the most it allows (leasectl serve --max-streams): wait by polling, or retry later", x.route, l.max), sh)
		return nil, false
	}
	l.total++
	if authed {
		l.byToken[id]++
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			l.mu.Lock()
			defer l.mu.Unlock()
			l.total--
			if authed {
				if l.byToken[id]--; l.byToken[id] <= 0 {
					delete(l.byToken, id)
				}
			}
		})
	}, true
}

// TokensReloaded tells the handler that [Config].Tokens may now return
// other tokens: every open stream checks its caller's token again, and
// ends (event end, status unauthorized or forbidden) when the token was
// removed or no longer allows it. Requests other than streams read the
// tokens anew each time and need no telling. leasectl serve calls it
// after each reload (SIGHUP). It is safe for concurrent use.
func (h *Handler) TokensReloaded() {
	h.reloadMu.Lock()
	defer h.reloadMu.Unlock()
	close(h.reloaded)
	h.reloaded = make(chan struct{})
}

// reloads returns a channel closed at the next [Handler.TokensReloaded].
func (h *Handler) reloads() <-chan struct{} {
	h.reloadMu.Lock()
	defer h.reloadMu.Unlock()
	return h.reloaded
}

// stillAllowed checks a stream's caller against the tokens in force: ""
// when its token still allows op in namespace, else the status that ends
// the stream and why.
func (h *Handler) stillAllowed(x *exchange, op protocol.Op, namespace string) (protocol.Status, string) {
	var tokens *Tokens
	if h.tokens != nil {
		tokens = h.tokens()
	}
	if tokens == nil {
		return "", ""
	}
	p, ok := tokens.authenticate(x.token)
	switch {
	case !ok:
		return StatusUnauthorized, "the stream's bearer token is no longer in the server's tokens"
	case !p.allows(op, namespace):
		return StatusForbidden, fmt.Sprintf("the stream's bearer token no longer allows it (a %s token of the namespaces %s)",
			p.Role, strings.Join(p.Globs, ","))
	}
	return "", ""
}
