package httpapi_test

import (
	"context"
	"fmt"
	"iter"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasestore/leasestore/audit"
	"github.com/leasestore/leasestore/httpapi"
	"github.com/leasestore/leasestore/memstore"
	"github.com/leasestore/leasestore/protocol"
)

// TestNamespacesRoute: GET /v1/namespaces lists the namespaces with live
// leases that the token may read, in pages; the Go client is a
// NamespaceLister over it.
func TestNamespacesRoute(t *testing.T) {
	t.Parallel()
	toks := mustTokens(t)
	s := newServer(t, &httpapi.Config{Tokens: func() *httpapi.Tokens { return toks }})
	for _, ns := range []string{"billing", "scan", "scan-a", "scan-b", "zeta"} {
		hold(t, s.rt, protocol.Key{Namespace: ns, Name: "k"}, "w")
	}
	r := []string{"Authorization", "Bearer " + readerToken} // scan,scan-*
	m := expect(t, "reader", send(t, "GET", s.url+"/v1/namespaces", "", r...), 200, "found")
	if got := fmt.Sprint(m["namespaces"]); got != "[scan scan-a scan-b]" {
		t.Fatalf("the reader's namespaces: %s", got)
	}
	m = expect(t, "reader, page", send(t, "GET", s.url+"/v1/namespaces?limit=1&after=scan", "", r...), 200, "found")
	if got := fmt.Sprint(m["namespaces"]); got != "[scan-a]" {
		t.Fatalf("the reader's page after scan: %s", got)
	}
	expect(t, "no token", send(t, "GET", s.url+"/v1/namespaces", ""), 401, "unauthorized")
	expect(t, "bad limit", send(t, "GET", s.url+"/v1/namespaces?limit=0x", "", r...), 400, "invalid")
	expect(t, "unknown parameter", send(t, "GET", s.url+"/v1/namespaces?prefix=s", "", r...), 400, "invalid")

	c, err := httpapi.NewClient(s.url, &httpapi.ClientConfig{Token: adminToken})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	var all []string
	for after := ""; ; {
		page, err := c.Namespaces(t.Context(), after, 2)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, page...)
		if len(page) < 2 {
			break
		}
		after = page[len(page)-1]
	}
	if got := strings.Join(all, ","); got != "billing,scan,scan-a,scan-b,zeta" {
		t.Fatalf("the admin's namespaces through the client: %s", got)
	}
}

// TestRenewManyRoute: POST /v1/renew-many renews each lease of one request
// with its own outcome and audit record; the Go client is a BulkRenewer
// over it, so a runtime over the client renews in one request.
func TestRenewManyRoute(t *testing.T) {
	t.Parallel()
	toks := mustTokens(t)
	s := newServer(t, &httpapi.Config{Tokens: func() *httpapi.Tokens { return toks }})
	a := hold(t, s.rt, protocol.Key{Namespace: "scan", Name: "a"}, "w")
	b := hold(t, s.rt, protocol.Key{Namespace: "scan", Name: "b"}, "w")
	w := []string{"Authorization", "Bearer " + writerToken}
	body := fmt.Sprintf(`{"renewals":[{"namespace":"scan","key":"a","owner":"w","token":%d,"ttl":"2h","request_id":"ra"},`+
		`{"namespace":"scan","key":"b","owner":"intruder","token":%d},{"namespace":"scan","key":"none","owner":"w","token":1}]}`, a.Token, b.Token)
	m := expect(t, "renew many", send(t, "POST", s.url+"/v1/renew-many", body, w...), 200, "found")
	var statuses []string
	for _, r := range m["results"].([]any) {
		statuses = append(statuses, r.(map[string]any)["status"].(string))
	}
	if got := strings.Join(statuses, ","); got != "renewed,not_owner,not_found" {
		t.Fatalf("renew many: %s\n%v", got, m)
	}
	if id := m["results"].([]any)[0].(map[string]any)["request_id"]; id != "ra" {
		t.Fatalf("the first renewal's request id: %v", id)
	}
	expect(t, "another namespace", send(t, "POST", s.url+"/v1/renew-many",
		`{"renewals":[{"namespace":"scan","key":"a","owner":"w","token":1},{"namespace":"billing","key":"a","owner":"w","token":1}]}`, w...),
		403, "forbidden")
	expect(t, "a reader", send(t, "POST", s.url+"/v1/renew-many", body, "Authorization", "Bearer "+readerToken), 403, "forbidden")
	expect(t, "none", send(t, "POST", s.url+"/v1/renew-many", `{"renewals":[]}`, w...), 400, "invalid")
	// The contract's 64 KiB holds here too (it took 1 MiB): 1,000 renewals
	// of 20-letter keys are about 70 KiB.
	var big strings.Builder
	big.WriteString(`{"renewals":[`)
	for i := range httpapi.MaxRenewManyRequest {
		if i > 0 {
			big.WriteString(",")
		}
		fmt.Fprintf(&big, `{"namespace":"scan","key":"key-%016d","owner":"w","token":1}`, i)
	}
	big.WriteString("]}")
	if big.Len() <= 64<<10 {
		t.Fatalf("the big body is %d bytes, not over 64 KiB", big.Len())
	}
	expect(t, "a body over 64 KiB", send(t, "POST", s.url+"/v1/renew-many", big.String(), w...), 413, "invalid")
	expect(t, "bad ttl", send(t, "POST", s.url+"/v1/renew-many", `{"renewals":[{"namespace":"scan","key":"a","owner":"w","token":1,"ttl":"5"}]}`, w...),
		400, "invalid")

	// Through the Go client: one request for both, each audited.
	rt := newClient(t, s.url, &httpapi.ClientConfig{Token: writerToken})
	results, err := rt.RenewMany(t.Context(), []protocol.RenewRequest{
		{Key: a.Key, Owner: "w", Token: a.Token}, {Key: b.Key, Owner: "w", Token: b.Token, TTL: time.Minute}})
	if err != nil || len(results) != 2 || results[0].Status != protocol.StatusRenewed || results[1].Status != protocol.StatusRenewed {
		t.Fatalf("RenewMany through the client: %+v, %v", results, err)
	}
	if ttl := results[0].Lease.ExpiresAt.Sub(results[0].Lease.RenewedAt); ttl != 2*time.Hour {
		t.Fatalf("a renewal without a TTL kept %v, want the lease's 2h", ttl)
	}
	page, err := s.rt.Get(t.Context(), protocol.GetRequest{Key: b.Key})
	if err != nil || page.Lease.ExpiresAt.Sub(page.Lease.RenewedAt) != time.Minute {
		t.Fatalf("b after the bulk renewal: %+v %v", page.Lease, err)
	}
	var renews int
	tr := expect(t, "audit", send(t, "GET", s.url+"/v1/audit?namespace=scan&limit=100", "", "Authorization", "Bearer "+adminToken), 200, "found")
	for _, r := range tr["records"].([]any) {
		if r.(map[string]any)["op"] == "renew" {
			renews++
		}
	}
	if renews != 3 {
		t.Fatalf("%d renew records, want 3 (one per renewal that took effect)", renews)
	}
	if got := s.log.String(); strings.Count(got, `"route":"renew-many"`) != 7 || strings.Contains(got, `"route":"renew"`) {
		t.Fatalf("want every renewal through renew-many (seven requests), none through renew:\n%s", got)
	}
}

// TestAuditFollowRoute: GET /v1/audit/follow streams each record as it
// commits; the Go client is an audit.Follower over it, so audit.Watch
// through it streams (no polling), and resumes from a cursor.
func TestAuditFollowRoute(t *testing.T) {
	t.Parallel()
	toks := mustTokens(t)
	s := newServer(t, &httpapi.Config{Tokens: func() *httpapi.Tokens { return toks }})
	hold(t, s.rt, protocol.Key{Namespace: "scan", Name: "before"}, "w")
	r := []string{"Authorization", "Bearer " + readerToken}
	expect(t, "every namespace", send(t, "GET", s.url+"/v1/audit/follow", "", r...), 403, "forbidden")
	expect(t, "bad since", send(t, "GET", s.url+"/v1/audit/follow?namespace=scan&since=soon", "", r...), 400, "invalid")

	raw := openStream(t, s.url+"/v1/audit/follow?namespace=scan", r...)
	if name, _, _ := raw.event(); name != "subscribed" {
		t.Fatalf("first event %q", name)
	}
	c, err := httpapi.NewClient(s.url, &httpapi.ClientConfig{Token: readerToken})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	if _, ok := audit.FollowerOf(audit.RuntimeReader(protocol.New(c, nil))); !ok {
		t.Fatal("a runtime reader over the client does not stream")
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	// From the start of the trail, through audit.Watch with an interval
	// of an hour: only a stream delivers the records of the next second.
	next, stop := iterPull(audit.Watch(ctx, c, audit.Query{Namespace: "scan"}, &audit.WatchConfig{Interval: time.Hour}))
	defer stop()
	if rec := mustNext(t, next); rec.Key != "before" {
		t.Fatalf("first record %+v", rec)
	}
	l := hold(t, s.rt, protocol.Key{Namespace: "scan", Name: "after"}, "w")
	if rec := mustNext(t, next); rec.Key != "after" || rec.Op != protocol.OpAcquire {
		t.Fatalf("second record %+v", rec)
	}
	let(t, s.rt, l)
	third := mustNext(t, next)
	if third.Key != "after" || third.Op != protocol.OpRelease {
		t.Fatalf("third record %+v", third)
	}
	// The raw stream carried the same: a record event, data an audit
	// page's record object.
	select {
	case line := <-raw.lines:
		if line != "event: record" {
			t.Fatalf("the raw stream's line after subscribed: %q", line)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no record event on the raw stream")
	}
	if line := <-raw.lines; !strings.HasPrefix(line, `data: {"id":`) || !strings.Contains(line, `"key":"after"`) {
		t.Fatalf("the raw stream's record: %q", line)
	}
	// Resuming after the second record yields the third, and nothing of
	// another namespace.
	hold(t, s.rt, protocol.Key{Namespace: "billing", Name: "x"}, "w")
	resumed, stop2 := iterPull(c.Follow(ctx, audit.Query{Namespace: "scan", Cursor: audit.EncodeCursor(third.ID - 1)}))
	defer stop2()
	if rec := mustNext(t, resumed); rec.ID != third.ID {
		t.Fatalf("resumed at %+v, want record %d", rec, third.ID)
	}
}

// iterPull is iter.Pull2 for records.
func iterPull(seq func(func(audit.Record, error) bool)) (func() (audit.Record, error, bool), func()) {
	return iter.Pull2(seq)
}

// mustNext returns the next record of a pulled stream within 10s.
func mustNext(t *testing.T, next func() (audit.Record, error, bool)) audit.Record {
	t.Helper()
	type got struct {
		rec audit.Record
		err error
		ok  bool
	}
	ch := make(chan got, 1)
	go func() {
		rec, err, ok := next()
		ch <- got{rec, err, ok}
	}()
	select {
	case g := <-ch:
		if g.err != nil || !g.ok {
			t.Fatalf("next record: %v (more: %v)", g.err, g.ok)
		}
		return g.rec
	case <-time.After(10 * time.Second):
		t.Fatal("no record within 10s")
	}
	return audit.Record{}
}

// TestRenewManyOfLongKeys: the Go client's RenewMany splits its requests
// by body size as well as by count. 1,000 renewals of valid but long keys
// and owners make a body over the route's 1 MiB: sent as one request it
// was answered 413 and every renewal failed as unavailable.
func TestRenewManyOfLongKeys(t *testing.T) {
	t.Parallel()
	s := newServer(t, nil)
	name := strings.Repeat("k", protocol.MaxNameLen-4)
	owner := strings.Repeat("o", protocol.MaxOwnerLen)
	reqs := make([]protocol.RenewRequest, httpapi.MaxRenewManyRequest)
	for i := range reqs {
		l := hold(t, s.rt, protocol.Key{Namespace: strings.Repeat("n", protocol.MaxNamespaceLen), Name: fmt.Sprintf("%s%04d", name, i)}, owner)
		reqs[i] = protocol.RenewRequest{Key: l.Key, Owner: owner, Token: l.Token, RequestID: strings.Repeat("r", protocol.MaxRequestIDLen-4) + fmt.Sprintf("%04d", i)}
	}
	results, err := newClient(t, s.url, nil).RenewMany(t.Context(), reqs)
	if err != nil {
		t.Fatalf("RenewMany of %d long keys through the client: %v", len(reqs), err)
	}
	for i, res := range results {
		if res.Status != protocol.StatusRenewed || res.Lease.Key != reqs[i].Key {
			t.Fatalf("renewal %d: %s %s", i, res.Status, res.Message)
		}
	}
	if len(results) != len(reqs) {
		t.Fatalf("%d results for %d renewals", len(results), len(reqs))
	}
}

// countingLister is a store whose namespace lister counts its calls.
type countingLister struct {
	protocol.Store
	nl    protocol.NamespaceLister
	calls atomic.Int64
}

func (c *countingLister) Namespaces(ctx context.Context, after string, limit int) ([]string, error) {
	c.calls.Add(1)
	return c.nl.Namespaces(ctx, after, limit)
}

// TestNamespacesOfANarrowTokenReadFullPages: a token that sees one
// namespace of 600 asks for one (as Client.Health does): the server read
// the store a namespace at a time, 600 calls; now in full pages.
func TestNamespacesOfANarrowTokenReadFullPages(t *testing.T) {
	t.Parallel()
	b := memstore.New(nil)
	rt := protocol.New(b, nil)
	t.Cleanup(func() { _ = rt.Close(context.Background()) })
	for i := range 600 {
		hold(t, rt, protocol.Key{Namespace: fmt.Sprintf("a-%03d", i), Name: "k"}, "w")
	}
	hold(t, rt, protocol.Key{Namespace: "scan", Name: "k"}, "w")
	store := &countingLister{Store: rt, nl: b}
	toks := mustTokens(t)
	h, err := httpapi.NewHandler(store, nil, &httpapi.Config{Logger: slog.New(slog.DiscardHandler), Tokens: func() *httpapi.Tokens { return toks }})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	m := expect(t, "a narrow reader's first namespace", send(t, "GET", srv.URL+"/v1/namespaces?limit=1", "", "Authorization", "Bearer "+readerToken), 200, "found")
	if got := fmt.Sprint(m["namespaces"]); got != "[scan]" {
		t.Fatalf("the reader's namespaces: %s", got)
	}
	if n := store.calls.Load(); n > 2 {
		t.Fatalf("%d store calls to find one namespace of 601, want at most 2", n)
	}
}

// withoutFollowRoute serves h on a loopback port as a server older than
// GET /v1/audit/follow would: that route answered as one h does not have.
func withoutFollowRoute(t *testing.T, h http.Handler) *httptest.Server {
	t.Helper()
	older := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/audit/follow" { // the real handler's answer to a route it does not have
			r.URL.Path, r.URL.RawPath = "/v1/audit/follow-not-yet", ""
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(older.Close)
	return older
}

// TestAuditFollowAgainstAServerWithoutTheRoute: a server older than GET
// /v1/audit/follow answers it as any route it does not have, 404 with its
// JSON body; the client's Follow then polls (audit.Watch), as against a
// proxy's 404 page. It took that JSON 404 for an outage and yielded the
// same error on every reconnect, for ever.
func TestAuditFollowAgainstAServerWithoutTheRoute(t *testing.T) {
	t.Parallel()
	s := newServer(t, nil)
	hold(t, s.rt, protocol.Key{Namespace: "scan", Name: "before"}, "w")
	older := withoutFollowRoute(t, s.h)
	expect(t, "the hidden route", send(t, "GET", older.URL+"/v1/audit/follow?namespace=scan", ""), 404, "invalid")
	c, err := httpapi.NewClient(older.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	next, stop := iterPull(c.Follow(ctx, audit.Query{Namespace: "scan"}))
	defer stop()
	if rec := mustNext(t, next); rec.Key != "before" {
		t.Fatalf("first record %+v", rec)
	}
}

// TestAuditFollowSinceAgainstAServerWithoutTheRoute: a follow from a time
// (Since, no cursor) against a server without the follow route polls from
// that time, as the route starts there. The polling fallback went through
// audit.Watch, which drops Since, and yielded the trail from its start.
func TestAuditFollowSinceAgainstAServerWithoutTheRoute(t *testing.T) {
	t.Parallel()
	s := newServer(t, nil)
	hold(t, s.rt, protocol.Key{Namespace: "scan", Name: "before"}, "w")
	s.clock.Advance(time.Minute)
	since := s.clock.Now().Add(-time.Second)
	hold(t, s.rt, protocol.Key{Namespace: "scan", Name: "after"}, "w")
	older := withoutFollowRoute(t, s.h)
	c, err := httpapi.NewClient(older.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	next, stop := iterPull(c.Follow(ctx, audit.Query{Namespace: "scan", Since: since}))
	defer stop()
	if rec := mustNext(t, next); rec.Key != "after" {
		t.Fatalf("first record since %s: %+v, want the acquire of after (at %s), not an older one", since, rec, since.Add(time.Second))
	}
}
