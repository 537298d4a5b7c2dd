package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"

	"github.com/leasestore/leasestore/audit"
	"github.com/leasestore/leasestore/httpapi"
	"github.com/leasestore/leasestore/internal/wire"
	"github.com/leasestore/leasestore/protocol"
)

// validating is a RoundTripper that checks every exchange against the
// OpenAPI document: every response, and every request the server did not
// refuse as bad input (400, 413).
type validating struct {
	t    *testing.T
	v    validator.Validator
	base http.RoundTripper

	mu       sync.Mutex
	seen     map[string]bool // "METHOD /path/template CODE"
	problems []string
}

func (vt *validating) RoundTrip(req *http.Request) (*http.Response, error) {
	var body []byte
	if req.Body != nil {
		var err error
		if body, err = io.ReadAll(req.Body); err != nil {
			return nil, err
		}
		_ = req.Body.Close()
		req.Body = io.NopCloser(bytes.NewReader(body))
	}
	resp, err := vt.base.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt == "text/event-stream" {
		// A stream lasts until the caller closes it: its code and media
		// type are checked here, its events by the caller.
		vresp := *resp
		vresp.Body = http.NoBody
		vt.check(req, &vresp, body, nil)
		return resp, nil
	}
	rb, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil {
		return nil, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(rb))

	vresp := *resp
	vresp.Body = io.NopCloser(bytes.NewReader(rb))
	vt.check(req, &vresp, body, rb)
	if p := template(req.URL.EscapedPath()); req.Method == http.MethodGet && p != "/v1/notify/{namespace}/{key}" && p != "/v1/audit/follow" {
		vt.head(req)
	}
	return resp, nil
}

// head sends the GET req again as HEAD, which every GET route but the
// streams answers as GET without the body, and checks that exchange too:
// the document describes the HEAD operations as well.
func (vt *validating) head(req *http.Request) {
	hreq := req.Clone(req.Context())
	hreq.Method, hreq.Body, hreq.ContentLength = http.MethodHead, nil, 0
	resp, err := vt.base.RoundTrip(hreq)
	if err != nil {
		return // the GET's context ended, or the server went away: the GET's own check stands
	}
	rb, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if len(rb) > 0 {
		vt.mu.Lock()
		vt.problems = append(vt.problems, fmt.Sprintf("HEAD %s -> %d: a body of %d bytes", req.URL.RequestURI(), resp.StatusCode, len(rb)))
		vt.mu.Unlock()
	}
	vresp := *resp
	vresp.Body = http.NoBody
	vt.check(hreq, &vresp, nil, nil)
}

// check validates an exchange: req with its body, resp with its body rb
// (nil for a stream) and records that its route and code were seen.
func (vt *validating) check(req *http.Request, resp *http.Response, body, rb []byte) {
	vreq := req.Clone(context.Background())
	vreq.Body = io.NopCloser(bytes.NewReader(body))
	vresp := resp
	what := fmt.Sprintf("%s %s -> %d", req.Method, req.URL.RequestURI(), resp.StatusCode)
	vt.mu.Lock()
	defer vt.mu.Unlock()
	if ok, errs := vt.v.ValidateHttpResponse(vreq, vresp); !ok {
		vt.problems = append(vt.problems, fmt.Sprintf("response of %s: %s\n%s", what, describe(errs), rb))
	}
	if resp.StatusCode != 400 && resp.StatusCode != 413 && resp.StatusCode != 415 {
		vreq.Body = io.NopCloser(bytes.NewReader(body))
		if ok, errs := vt.v.ValidateHttpRequest(vreq); !ok {
			vt.problems = append(vt.problems, fmt.Sprintf("request %s: %s", what, describe(errs)))
		}
	}
	vt.seen[fmt.Sprintf("%s %s %d", req.Method, template(req.URL.EscapedPath()), resp.StatusCode)] = true
}

func describe(errs any) string {
	b, _ := json.Marshal(errs)
	return string(b)
}

// template maps a path to its OpenAPI path.
func template(p string) string {
	if rest, ok := strings.CutPrefix(p, "/v1/leases/"); ok {
		if strings.Contains(rest, "/") {
			return "/v1/leases/{namespace}/{key}"
		}
		return "/v1/leases/{namespace}"
	}
	if strings.HasPrefix(p, "/v1/notify/") {
		return "/v1/notify/{namespace}/{key}"
	}
	return p
}

// TestOpenAPIDocumentIsTrue serves the document, checks that it is a valid
// OpenAPI 3.1 document, then drives every route through the Go client and
// plain requests, validating each request and response against it, and
// checks that every route and code the document declares was seen.
func TestOpenAPIDocumentIsTrue(t *testing.T) {
	t.Parallel()
	toks, err := httpapi.ParseTokens(strings.NewReader(tokensFile()))
	if err != nil {
		t.Fatal(err)
	}
	s := newServer(t, &httpapi.Config{Tokens: func() *httpapi.Tokens { return toks }, MaxTimeout: time.Minute})
	raw := send(t, "GET", s.url+"/openapi.json", "")
	if raw.code != 200 {
		t.Fatalf("/openapi.json: %d", raw.code)
	}
	published, err := libopenapi.NewDocument([]byte(raw.body))
	if err != nil {
		t.Fatal(err)
	}
	if v := published.GetVersion(); v != "3.1.0" {
		t.Fatalf("OpenAPI version %s", v)
	}
	pv, errs := validator.NewValidator(published)
	if len(errs) > 0 {
		t.Fatalf("validator: %v", errs)
	}
	if ok, verrs := pv.ValidateDocument(); !ok {
		t.Fatalf("the document is not valid OpenAPI 3.1: %s", describe(verrs))
	}
	// The exchanges are validated against the document with every answer's
	// schema closed (additionalProperties false), which only narrows it:
	// the server sends no field the document does not list, though the
	// document lets a later release add some (TestOpenAPIAdditionalProperties).
	doc, err := libopenapi.NewDocument(closedSchemas(t, raw.body))
	if err != nil {
		t.Fatal(err)
	}
	v, errs := validator.NewValidator(doc)
	if len(errs) > 0 {
		t.Fatalf("validator: %v", errs)
	}
	if ok, verrs := v.ValidateDocument(); !ok {
		t.Fatalf("the document with closed schemas is not valid OpenAPI 3.1: %s", describe(verrs))
	}
	vt := &validating{t: t, v: v, base: &http.Transport{DisableKeepAlives: true}, seen: map[string]bool{}}
	hc := &http.Client{Transport: vt}

	// Through the Go client, as an admin.
	c, err := httpapi.NewClient(s.url, &httpapi.ClientConfig{Token: adminToken, HTTPClient: hc})
	if err != nil {
		t.Fatal(err)
	}
	rt := protocol.New(c, nil)
	defer rt.Close(context.Background())
	ctx := t.Context()
	k := protocol.Key{Namespace: "scan", Name: "a/b %2F ü"}
	res, _ := rt.Acquire(ctx, protocol.AcquireRequest{Key: k, Owner: "w1", TTL: time.Minute, RequestID: "r1"})
	tok := res.Lease.Token
	// The notification stream of k, through the Go client: the releases
	// below signal it.
	signals, unsubscribe, err := rt.Subscribe(ctx, k)
	if err != nil {
		t.Fatalf("subscribe: %v", err)
	}
	_, _ = rt.Acquire(ctx, protocol.AcquireRequest{Key: k, Owner: "w1", TTL: time.Minute, RequestID: "r1"}) // replay
	_, _ = rt.Acquire(ctx, protocol.AcquireRequest{Key: k, Owner: "w2", TTL: time.Minute})                  // 409
	_, _ = rt.Get(ctx, protocol.GetRequest{Key: k})
	_, _ = rt.Get(ctx, protocol.GetRequest{Key: protocol.Key{Namespace: "scan", Name: "none"}}) // 404
	_, _ = rt.List(ctx, protocol.ListRequest{Namespace: "scan", Prefix: "a", Owner: "w1", IncludeExpired: true, Limit: 10})
	_, _ = rt.Renew(ctx, protocol.RenewRequest{Key: k, Owner: "w1", Token: tok, TTL: time.Minute})
	_, _ = rt.Renew(ctx, protocol.RenewRequest{Key: k, Owner: "w9", Token: tok, TTL: time.Minute})                                           // 409
	_, _ = rt.Renew(ctx, protocol.RenewRequest{Key: protocol.Key{Namespace: "scan", Name: "none"}, Owner: "w1", Token: 1, TTL: time.Minute}) // 404
	_, _ = rt.Release(ctx, protocol.ReleaseRequest{Key: protocol.Key{Namespace: "scan", Name: "none"}, Owner: "w1", Token: 1})               // 404
	_, _ = rt.Release(ctx, protocol.ReleaseRequest{Key: k, Owner: "w9", Token: tok})                                                         // 409
	s.clock.Advance(2 * time.Minute)
	_, _ = rt.Renew(ctx, protocol.RenewRequest{Key: k, Owner: "w1", Token: tok, TTL: time.Minute}) // 410
	_, _ = rt.Release(ctx, protocol.ReleaseRequest{Key: k, Owner: "w1", Token: tok})               // 410
	res, _ = rt.Acquire(ctx, protocol.AcquireRequest{Key: k, Owner: "w2", TTL: time.Minute})
	_, _ = rt.Release(ctx, protocol.ReleaseRequest{Key: k, Owner: "w2", Token: res.Lease.Token})
	_, _ = rt.Release(ctx, protocol.ReleaseRequest{Key: k, Owner: "w2", Token: res.Lease.Token}) // 404
	res, _ = rt.Acquire(ctx, protocol.AcquireRequest{Key: k, Owner: "w3", TTL: time.Minute})
	_, _ = rt.Revoke(ctx, protocol.RevokeRequest{Key: k, Actor: "ops", Reason: "r", Token: res.Lease.Token + 1}) // 409 not_owner
	_, _ = rt.Revoke(ctx, protocol.RevokeRequest{Key: k, Actor: "ops", Reason: "r", Token: res.Lease.Token})
	_, _ = rt.Revoke(ctx, protocol.RevokeRequest{Key: k, Actor: "ops", Reason: "r"}) // 404
	_ = rt.Health(ctx)
	select {
	case <-signals:
	case <-time.After(10 * time.Second):
		t.Fatal("the releases and revokes of the key did not signal its stream")
	}
	unsubscribe()
	if _, err := c.ReadAudit(ctx, audit.Query{Namespace: "scan", Key: k.Name, Since: s.clock.Now().Add(-time.Hour), Limit: 5, Follow: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.ReadAudit(ctx, audit.Query{}); err != nil {
		t.Fatal(err)
	}
	// The op, owner and order filters, and a newest-first page's cursor.
	p, err := c.ReadAudit(ctx, audit.Query{Namespace: "scan", Ops: []protocol.Op{protocol.OpAcquire, protocol.OpRelease}, Owner: "w2",
		Newest: true, Limit: 1})
	if err != nil || p.NextCursor == "" {
		t.Fatalf("newest-first filtered page: %+v, %v; want a page with a next cursor", p, err)
	}
	if _, err := c.ReadAudit(ctx, audit.Query{Namespace: "scan", Ops: []protocol.Op{protocol.OpAcquire, protocol.OpRelease}, Owner: "w2",
		Newest: true, Limit: 1, Cursor: p.NextCursor}); err != nil {
		t.Fatal(err)
	}

	// Plain requests for the rest of the codes.
	do := func(method, path, body string, headers ...string) {
		base := s.url
		if strings.HasPrefix(path, "http") {
			base = ""
		}
		req, err := http.NewRequest(method, base+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if body == "" {
			req.Body = nil
		} else {
			req.Header.Set("Content-Type", "application/json")
		}
		for i := 0; i+1 < len(headers); i += 2 {
			if headers[i] == "Host" {
				req.Host = headers[i+1]
				continue
			}
			req.Header.Set(headers[i], headers[i+1])
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
	}
	w := []string{"Authorization", "Bearer " + writerToken}
	r := []string{"Authorization", "Bearer " + readerToken}
	a := []string{"Authorization", "Bearer " + adminToken}
	bodies := map[string]string{
		"/v1/acquire": `{"namespace":"scan","key":"k","owner":"o","ttl":"1s"}`,
		"/v1/renew":   `{"namespace":"scan","key":"k","owner":"o","token":1,"ttl":"1s"}`,
		"/v1/release": `{"namespace":"scan","key":"k","owner":"o","token":1}`,
		"/v1/revoke":  `{"namespace":"scan","key":"k","actor":"o","reason":"r"}`,
	}
	for path, body := range bodies {
		do("POST", path, `{"namespace":"scan",`, a...)                                           // 400
		do("POST", path, body)                                                                   // 401
		do("POST", path, body, r...)                                                             // 403 (role)
		do("POST", path, `{"request_id":"`+strings.Repeat("x", httpapi.MaxBodyBytes)+`"}`, a...) // 413
		do("POST", path, body, append(a, "Content-Type", "text/plain")...)                       // 415
	}
	for _, path := range []string{"/v1/leases/scan/k", "/v1/leases/scan", "/v1/audit?namespace=scan", "/v1/notify/scan/k"} {
		do("GET", path, "")                                              // 401
		do("GET", strings.Replace(path, "scan", "billing", 1), "", r...) // 403
		do("GET", path+map[bool]string{true: "&", false: "?"}[strings.Contains(path, "?")]+"limit=x", "", r...)
	}
	do("GET", "/v1/leases/scan/k", "", append(r, httpapi.HeaderTimeout, "x")...) // 400 for the get route
	do("GET", "/v1/notify/scan/a%01b", "", r...)                                 // 400: a control character in the key
	do("POST", "/v1/acquire", `{"namespace":"scan","key":"k","owner":"o","ttl":"1s"}`, w...)
	// The routes of v3's parity: namespaces, renew-many, audit follow.
	do("GET", "/v1/namespaces?limit=5", "", r...)
	do("GET", "/v1/namespaces?limit=x", "", r...) // 400
	do("GET", "/v1/namespaces", "")               // 401
	manyBody := `{"renewals":[{"namespace":"scan","key":"k","owner":"o","token":1,"ttl":"1s"},{"namespace":"scan","key":"k","owner":"o","token":1}]}`
	do("POST", "/v1/renew-many", manyBody, w...)
	do("POST", "/v1/renew-many", `{"renewals":[]}`, w...)                                                              // 400
	do("POST", "/v1/renew-many", `{"renewals":[]}`, append(w, "Content-Type", "application/x-www-form-urlencoded")...) // 415
	do("POST", "/v1/renew-many", manyBody)                                                                             // 401
	do("POST", "/v1/renew-many", manyBody, r...)                                                                       // 403
	do("POST", "/v1/renew-many", `{"renewals":[{"namespace":"scan","key":"k","owner":"o","token":1,"request_id":"`+
		strings.Repeat("x", httpapi.MaxRenewManyBodyBytes)+`"}]}`, w...) // 413
	do("GET", "/v1/audit/follow?namespace=scan", "", r...)
	do("GET", "/v1/audit/follow?namespace=scan&since=soon", "", r...) // 400
	do("GET", "/v1/audit/follow?namespace=scan&op=acquire,revoke&owner=w3", "", r...)
	do("GET", "/v1/audit/follow?namespace=scan&op=expire", "", r...)         // 400
	do("GET", "/v1/audit?namespace=scan&op=expire", "", r...)                // 400: not an op of the trail
	do("GET", "/v1/audit?namespace=scan&order=sideways", "", r...)           // 400
	do("GET", "/v1/audit?namespace=scan&order=newest&follow=true", "", r...) // 400
	do("GET", "/v1/audit/follow?namespace=scan", "")                         // 401
	do("GET", "/v1/audit/follow", "", r...)                                  // 403: every namespace
	do("GET", "/healthz", "")
	do("GET", "/metrics", "")
	do("GET", "/openapi.json", "")
	// A store that never answers in time: 504 on every route that asks it;
	// a server without an audit reader: 503 on /v1/audit.
	stalled, err := httpapi.NewHandler(stallingStore{s.rt}, stallingReader{}, &httpapi.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	st := httptest.NewServer(stalled)
	defer st.Close()
	quick := []string{httpapi.HeaderTimeout, "20ms"}
	for path, body := range bodies {
		do("POST", st.URL+path, body, quick...)
	}
	for _, path := range []string{"/v1/leases/scan/k", "/v1/leases/scan", "/v1/audit?namespace=scan", "/readyz", "/v1/notify/scan/k",
		"/v1/namespaces", "/v1/audit/follow?namespace=scan"} {
		do("GET", st.URL+path, "", quick...)
	}
	do("POST", st.URL+"/v1/renew-many", `{"renewals":[{"namespace":"scan","key":"k","owner":"o","token":1}]}`, quick...)
	noAudit, err := httpapi.NewHandler(s.rt, nil, &httpapi.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	na := httptest.NewServer(noAudit)
	defer na.Close()
	do("GET", na.URL+"/v1/audit", "")
	do("GET", na.URL+"/v1/audit/follow", "")
	// A store that cannot signal: 501 on /v1/notify.
	silent, err := httpapi.NewHandler(struct{ protocol.Store }{s.rt}, nil, &httpapi.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ss := httptest.NewServer(silent)
	defer ss.Close()
	do("GET", ss.URL+"/v1/notify/scan/k", "")
	do("GET", ss.URL+"/v1/namespaces", "") // 501: the store cannot list namespaces
	// Serve without tokens (LoopbackOnly): a request addressed to a name
	// that is not loopback is refused, 403, on every route.
	lo := newServer(t, &httpapi.Config{LoopbackOnly: true})
	rebound := []string{"Host", "rebound.example"}
	for _, path := range []string{"/healthz", "/readyz", "/metrics", "/openapi.json", "/v1/leases/scan/k", "/v1/leases/scan",
		"/v1/audit?namespace=scan", "/v1/namespaces", "/v1/notify/scan/k", "/v1/audit/follow?namespace=scan"} {
		do("GET", lo.url+path, "", rebound...)
	}
	for path, body := range bodies {
		do("POST", lo.url+path, body, rebound...)
	}
	do("POST", lo.url+"/v1/renew-many", `{"renewals":[{"namespace":"scan","key":"k","owner":"o","token":1}]}`, rebound...)

	// A token at its cap of streams: 429 on /v1/notify.
	capped := newServer(t, &httpapi.Config{Tokens: func() *httpapi.Tokens { return toks }, MaxStreamsPerToken: 1})
	if first := openStream(t, capped.url+"/v1/notify/scan/k", r...); first.resp.StatusCode != 200 {
		t.Fatalf("the capped server's first stream: %d", first.resp.StatusCode)
	}
	do("GET", capped.url+"/v1/notify/scan/k2", "", r...)
	do("GET", capped.url+"/v1/audit/follow?namespace=scan", "", r...)

	// The store closes: 503 on every route that reaches it.
	if err := s.rt.Close(ctx); err != nil {
		t.Fatal(err)
	}
	do("GET", "/readyz", "")
	do("POST", "/v1/acquire", `{"namespace":"scan","key":"k","owner":"o","ttl":"1s"}`, w...)
	do("POST", "/v1/renew", `{"namespace":"scan","key":"k","owner":"o","token":1,"ttl":"1s"}`, w...)
	do("POST", "/v1/release", `{"namespace":"scan","key":"k","owner":"o","token":1}`, w...)
	do("POST", "/v1/revoke", `{"namespace":"scan","key":"k","actor":"o","reason":"r"}`, a...)
	do("GET", "/v1/leases/scan/k", "", r...)
	do("GET", "/v1/leases/scan", "", r...)
	do("GET", "/v1/notify/scan/k", "", r...)
	do("GET", "/v1/namespaces", "", r...)
	do("POST", "/v1/renew-many", `{"renewals":[{"namespace":"scan","key":"k","owner":"o","token":1}]}`, w...)
	do("GET", "/readyz", "", httpapi.HeaderTimeout, "soon") // 400

	vt.mu.Lock()
	defer vt.mu.Unlock()
	for _, p := range vt.problems {
		t.Error(p)
	}
	// Every route and code the document declares was exercised.
	// A body that does not arrive in time (408) cannot pass through this
	// transport, which reads each request's body before sending it:
	// TestSlowBodiesAreCutOff provokes it on a raw connection.
	notProvoked := map[string]bool{}
	for _, p := range []string{"/v1/acquire", "/v1/renew", "/v1/release", "/v1/revoke", "/v1/renew-many"} {
		notProvoked["POST "+p+" 408"] = true
	}
	var missing []string
	model, err := doc.BuildV3Model()
	if err != nil {
		t.Fatal(err)
	}
	for path, item := range model.Model.Paths.PathItems.FromOldest() {
		for method, op := range item.GetOperations().FromOldest() {
			for code := range op.Responses.Codes.KeysFromOldest() {
				key := fmt.Sprintf("%s %s %s", strings.ToUpper(method), path, code)
				if !vt.seen[key] && !notProvoked[key] {
					missing = append(missing, key)
				}
			}
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("declared but never answered: %s\nseen: %v", strings.Join(missing, ", "), keys(vt.seen))
	}
}

// closedSchemas returns the OpenAPI document doc with additionalProperties
// false on every object schema of its components that leaves it open (the
// answers' schemas).
func closedSchemas(t *testing.T, doc string) []byte {
	t.Helper()
	var d map[string]any
	if err := json.Unmarshal([]byte(doc), &d); err != nil {
		t.Fatal(err)
	}
	schemas := d["components"].(map[string]any)["schemas"].(map[string]any)
	closed := 0
	for _, sc := range schemas {
		m := sc.(map[string]any)
		if _, set := m["additionalProperties"]; m["type"] == "object" && !set {
			m["additionalProperties"] = false
			closed++
		}
	}
	if closed == 0 {
		t.Fatal("closedSchemas: no schema left additionalProperties open")
	}
	b, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func keys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// TestOpenAPISchemasMatchTypes: the document's body schemas name exactly
// the JSON fields of the Go types that make the bodies.
func TestOpenAPISchemasMatchTypes(t *testing.T) {
	t.Parallel()
	s := newServer(t, nil)
	var doc struct {
		Components struct {
			Schemas map[string]struct {
				Properties map[string]any `json:"properties"`
				Required   []string       `json:"required"`
			} `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal([]byte(send(t, "GET", s.url+"/openapi.json", "").body), &doc); err != nil {
		t.Fatal(err)
	}
	for name, typ := range map[string]reflect.Type{
		"Lease": reflect.TypeFor[wire.Lease](), "Result": reflect.TypeFor[wire.Result](), "ListPage": reflect.TypeFor[wire.ListPage](),
		"Record": reflect.TypeFor[wire.Record](), "AuditPage": reflect.TypeFor[wire.AuditPage](), "Probe": reflect.TypeFor[wire.Error](),
		"NotifyEvent": reflect.TypeFor[wire.NotifyEvent](), "NamespacePage": reflect.TypeFor[wire.NamespacePage](),
		"RenewManyPage": reflect.TypeFor[wire.RenewManyPage](),
	} {
		sc, ok := doc.Components.Schemas[name]
		if !ok {
			t.Fatalf("no schema %s", name)
		}
		var fields, required []string
		for i := range typ.NumField() {
			tag := typ.Field(i).Tag.Get("json")
			n, opts, _ := strings.Cut(tag, ",")
			fields = append(fields, n)
			if opts != "omitempty" {
				required = append(required, n)
			}
		}
		props := slices.Sorted(func(yield func(string) bool) {
			for p := range sc.Properties {
				if !yield(p) {
					return
				}
			}
		})
		slices.Sort(fields)
		slices.Sort(required)
		req := slices.Clone(sc.Required)
		slices.Sort(req)
		if !slices.Equal(props, fields) || !slices.Equal(req, required) {
			t.Errorf("schema %s: properties %v required %v; the Go type has fields %v, required %v", name, props, req, fields, required)
		}
	}
}

// stallingStore answers only when the request's deadline passed.
type stallingStore struct{ protocol.Store }

func (s stallingStore) Acquire(ctx context.Context, r protocol.AcquireRequest) (protocol.Result, error) {
	<-ctx.Done()
	return s.Store.Acquire(ctx, r)
}

func (s stallingStore) Renew(ctx context.Context, r protocol.RenewRequest) (protocol.Result, error) {
	<-ctx.Done()
	return s.Store.Renew(ctx, r)
}

func (s stallingStore) Release(ctx context.Context, r protocol.ReleaseRequest) (protocol.Result, error) {
	<-ctx.Done()
	return s.Store.Release(ctx, r)
}

func (s stallingStore) Revoke(ctx context.Context, r protocol.RevokeRequest) (protocol.Result, error) {
	<-ctx.Done()
	return s.Store.Revoke(ctx, r)
}

func (s stallingStore) Get(ctx context.Context, r protocol.GetRequest) (protocol.Result, error) {
	<-ctx.Done()
	return s.Store.Get(ctx, r)
}

func (s stallingStore) List(ctx context.Context, r protocol.ListRequest) (protocol.ListResult, error) {
	<-ctx.Done()
	return s.Store.List(ctx, r)
}

func (s stallingStore) Health(ctx context.Context) error {
	<-ctx.Done()
	return s.Store.Health(ctx)
}

func (s stallingStore) Subscribe(ctx context.Context, _ protocol.Key) (<-chan struct{}, func(), error) {
	<-ctx.Done()
	return nil, nil, ctx.Err()
}

func (s stallingStore) Do(ctx context.Context, op protocol.Op, fn func(ctx context.Context, b protocol.Backend) error) error {
	<-ctx.Done()
	return s.Store.(*protocol.Runtime).Do(ctx, op, fn)
}

// stallingReader answers only when the request's deadline passed.
type stallingReader struct{}

func (stallingReader) ReadAudit(ctx context.Context, _ audit.Query) (audit.Page, error) {
	<-ctx.Done()
	return audit.Page{}, ctx.Err()
}
