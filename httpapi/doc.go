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
//	POST /v1/renew     {"namespace","key","owner","token","ttl","request_id"?}
//	POST /v1/release   {"namespace","key","owner","token","request_id"?}
//	POST /v1/revoke    {"namespace","key","actor","reason","token"?,"request_id"?}
//	GET  /v1/leases/{namespace}/{key...}   get
//	GET  /v1/leases/{namespace}?prefix=&owner=&include_expired=&limit=&cursor=   list
//	GET  /v1/audit?namespace=&key=&since=&limit=&cursor=&follow=
//	GET  /healthz  /readyz  /metrics  /openapi.json
//
// The body's status is authoritative; the HTTP code follows from it
// ([StatusCode]). A request names its request id in the body or in the
// Idempotency-Key header, and its deadline in the Request-Timeout header
// (bounded by the handler's maximum). Bodies are limited to [MaxBodyBytes]
// and unknown JSON fields are refused.
//
// This package must not import any database driver or any package under
// sqlstore/: it serves whatever Store it is given.
package httpapi
