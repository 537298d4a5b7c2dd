// Package httpapi serves a lease store over HTTP/JSON and reaches one: a
// [Handler] over a [protocol.Store] (and an [audit.Reader]) answers the
// routes that DESIGN.md pins, and a [Client] is a [protocol.Backend] (and an
// [audit.Reader]) that speaks to such a handler, so that
// protocol.New(client, nil) is a Store over HTTP that passes the backend
// contract suite like a local store.
//
// Routes (bodies in leasectl's JSON shapes, package internal/wire):
//
//	POST /v1/acquire   {"namespace","key","owner","ttl":"30s","request_id"?}
//	POST /v1/renew     {"namespace","key","owner","token","ttl"?,"request_id"?}   (no ttl: keep the lease's TTL)
//	POST /v1/release   {"namespace","key","owner","token","request_id"?}
//	POST /v1/revoke    {"namespace","key","actor","reason","token"?,"request_id"?}
//	GET  /v1/leases/{namespace}/{key...}   get
//	GET  /v1/leases/{namespace}?prefix=&owner=&include_expired=&limit=&cursor=   list
//	GET  /v1/audit?namespace=&key=&since=&limit=&cursor=&follow=&op=&owner=&order=
//	GET  /v1/notify/{namespace}/{key...}   a stream of signals (an addition to DESIGN.md's routes)
//	GET  /v1/namespaces?after=&limit=      the namespaces the token may read that hold live leases
//	POST /v1/renew-many {"renewals":[renew bodies...]}   one request, each renewal its own outcome and record
//	GET  /v1/audit/follow?namespace=&key=&cursor=&since=&op=&owner=   the trail's records as they commit (a stream)
//	GET  /healthz  /readyz  /metrics  /openapi.json
//
// The Client is a [protocol.NamespaceLister], a [protocol.BulkRenewer] and
// an [audit.Follower] over the last three. Durations (ttl, Request-Timeout)
// and times (since) take the CLI's grammar (package durations):
// 90s, 15m, 1h30m, 2d; RFC 3339 or a duration back from now.
//
// Hostile clients: a body must arrive within [Config].BodyTimeout (408;
// a refusal before the body is read answers at once and closes an HTTP/1
// connection); streams (notify, audit follow) are capped per server and
// per token ([Config].MaxStreams, MaxStreamsPerToken: 503, 429);
// [Handler.TokensReloaded] ends the streams of tokens a reload removed or
// narrowed; the answers of a store that did not answer (unavailable,
// timeout, closed) never carry the driver's words, which name the
// database's user, name and address: those go to [Config].Logger.
//
// The body's status is authoritative; the HTTP code follows from it
// ([StatusCode]). A request names its request id in the body or in the
// Idempotency-Key header, and its deadline in the Request-Timeout header
// (bounded by the handler's maximum). Bodies are limited to [MaxBodyBytes]
// and unknown JSON fields are refused.
//
// GET /v1/notify/{namespace}/{key} carries the served store's
// [protocol.Notifier] over HTTP, so that a blocking acquire through a
// [Client] wakes when the holder releases instead of polling. It takes the
// reader role for the namespace, like get, and answers 200 with a stream
// of server-sent events (text/event-stream), each event's data one JSON
// object ({"status","message","keep_alive"?}): first "subscribed" (the
// subscription is live; keep_alive is the keep-alive interval), then
// "signal" whenever the key is released or revoked, by any process
// sharing the store, and "end" (with the status of why: unavailable,
// closed, timeout) when the server ends the stream; between events, a
// comment line ": keep-alive" every [Config].KeepAlive. The stream ends when
// the client goes away, when the store closes or can no longer signal, and
// at [Handler.CloseStreams] (register it with the http.Server's
// RegisterOnShutdown, as leasectl serve does, so that Shutdown is not held
// up). A store that cannot signal answers 501 (status not_implemented);
// the client then polls, as it does against a server without the route.
// Request-Timeout bounds the subscription, not the stream.
//
// This package must not import any database driver or any package under
// sqlstore/: it serves whatever Store it is given.
package httpapi
