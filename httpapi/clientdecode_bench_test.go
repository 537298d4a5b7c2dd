package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/leasestore/leasestore/httpapi"
	"github.com/leasestore/leasestore/internal/wire"
	"github.com/leasestore/leasestore/protocol"
)

// cannedTransport answers every request with status 200 and body, without
// a network: what a benchmark of the client then measures is its own
// encoding of the request and decoding of the answer.
type cannedTransport struct{ body []byte }

func (c cannedTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil {
		_, _ = io.Copy(io.Discard, r.Body)
		_ = r.Body.Close()
	}
	return &http.Response{StatusCode: http.StatusOK, Header: http.Header{"Content-Type": {"application/json"}},
		Body: io.NopCloser(bytes.NewReader(c.body)), ContentLength: int64(len(c.body)), Request: r}, nil
}

// BenchmarkClientDecode: the Go client reading the largest answers it
// gets, a renew-many answer of MaxRenewManyRequest results and a list
// page of MaxListLimit leases (each answer's every field checked present).
func BenchmarkClientDecode(b *testing.B) {
	at := time.Date(2030, 1, 2, 3, 4, 5, 123456000, time.UTC)
	// Short names: MaxRenewManyRequest renewals fit in one request's
	// MaxRenewManyBodyBytes.
	lease := func(i int) protocol.Lease {
		return protocol.Lease{Key: protocol.Key{Namespace: "s", Name: fmt.Sprintf("t%04d", i)},
			Owner: "w", Token: int64(1_000_000 + i), AcquiredAt: at, RenewedAt: at.Add(time.Second),
			ExpiresAt: at.Add(31 * time.Second), Version: protocol.LeaseFormatVersion}
	}
	client := func(b *testing.B, body any) *httpapi.Client {
		raw, err := json.Marshal(body)
		if err != nil {
			b.Fatal(err)
		}
		c, err := httpapi.NewClient("http://127.0.0.1:7070", &httpapi.ClientConfig{
			HTTPClient: &http.Client{Transport: cannedTransport{raw}}, MaxAttempts: 1})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = c.Close(context.Background()) })
		b.SetBytes(int64(len(raw)))
		return c
	}
	b.Run(fmt.Sprintf("renew-many-%d", httpapi.MaxRenewManyRequest), func(b *testing.B) {
		page := wire.RenewManyPage{Status: string(protocol.StatusFound)}
		reqs := make([]protocol.RenewRequest, httpapi.MaxRenewManyRequest)
		for i := range reqs {
			l := lease(i)
			reqs[i] = protocol.RenewRequest{Key: l.Key, Owner: l.Owner, Token: l.Token}
			page.Results = append(page.Results, wire.FromResult(protocol.Result{Status: protocol.StatusRenewed,
				RequestID: fmt.Sprintf("renew-%06d", i), Lease: &l}, ""))
		}
		c := client(b, page)
		b.ReportAllocs()
		for b.Loop() {
			res, err := c.RenewMany(b.Context(), reqs)
			if err != nil || len(res) != len(reqs) {
				b.Fatalf("renew-many: %d results, %v", len(res), err)
			}
		}
	})
	b.Run(fmt.Sprintf("list-%d", protocol.MaxListLimit), func(b *testing.B) {
		leases := make([]protocol.Lease, protocol.MaxListLimit)
		for i := range leases {
			leases[i] = lease(i)
		}
		c := client(b, wire.FromList(protocol.ListResult{Status: protocol.StatusFound, Leases: leases, NextCursor: "l1.next"}))
		b.ReportAllocs()
		for b.Loop() {
			res, err := c.List(b.Context(), protocol.ListRequest{Namespace: "s", Limit: protocol.MaxListLimit})
			if err != nil || len(res.Leases) != protocol.MaxListLimit {
				b.Fatalf("list: %d leases, %v", len(res.Leases), err)
			}
		}
	})
}
