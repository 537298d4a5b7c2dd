package httpapi

import (
	"encoding/json"
	"net/url"
	"testing"

	"github.com/leasestore/leasestore/internal/wire"
)

// FuzzDecoders feeds arbitrary bodies and query strings to the request
// decoders. They must never panic, and what they accept must survive the
// client's encoding: a decoded request that the store would accept (valid
// UTF-8 and so on), sent as the client sends it, decodes to the same
// request.
func FuzzDecoders(f *testing.F) {
	for _, seed := range []string{
		`{"namespace":"ns","key":"k","owner":"o","ttl":"30s","request_id":"r"}`,
		`{"namespace":"ns","key":"a/b%2F","owner":"o","token":7,"ttl":"1m30s"}`,
		`{"namespace":"ns","key":"k","actor":"ops","reason":"stuck","token":0}`,
		`{"namespace":"ns","key":"k","owner":"o","ttl":"30s"}{}`,
		`{"namespace":"ns","key":"k","owner":"o","ttl":30}`,
		`{"colour":"red"}`, `[]`, `null`, ``, `{`, `{"token":1e400}`, `{"ttl":"-5s"}`,
		`{"namespace":"\u0000","key":"\ud800"}`,
	} {
		f.Add(seed, "idem", "prefix=a&limit=10&include_expired=true&cursor=c1.YQ", "ns%2Fx")
	}
	f.Add(`{}`, "", "namespace=ns&key=k&since=2030-01-02T03:04:05.123456Z&limit=5&follow=1", "")
	f.Add(`{}`, "", "limit=-1&limit=2", "%zz")
	f.Fuzz(func(t *testing.T, body, idem, query, nsPath string) {
		b := []byte(body)
		if r, err := decodeAcquire(b, idem); err == nil && r.Validate() == nil {
			again, err := decodeAcquire(marshal(t, acquireBody{r.Key.Namespace, r.Key.Name, r.Owner, r.TTL.String(), r.RequestID, wire.OptDuration(r.LockDelay)}), "")
			if err != nil || again != r {
				t.Fatalf("acquire %+v does not round-trip: %+v, %v", r, again, err)
			}
		}
		if r, err := decodeRenew(b, idem); err == nil && r.Validate() == nil {
			again, err := decodeRenew(marshal(t, renewBody{r.Key.Namespace, r.Key.Name, r.Owner, r.Token, r.TTL.String(), r.RequestID}), "")
			if err != nil || again != r {
				t.Fatalf("renew %+v does not round-trip: %+v, %v", r, again, err)
			}
		}
		if r, err := decodeRelease(b, idem); err == nil && r.Validate() == nil {
			again, err := decodeRelease(marshal(t, releaseBody{r.Key.Namespace, r.Key.Name, r.Owner, r.Token, r.RequestID}), "")
			if err != nil || again != r {
				t.Fatalf("release %+v does not round-trip: %+v, %v", r, again, err)
			}
		}
		if r, err := decodeRevoke(b, idem); err == nil && r.Validate() == nil {
			again, err := decodeRevoke(marshal(t, revokeBody{r.Key.Namespace, r.Key.Name, r.Actor, r.Reason, r.Token, r.RequestID}), "")
			if err != nil || again != r {
				t.Fatalf("revoke %+v does not round-trip: %+v, %v", r, again, err)
			}
		}
		q, err := url.ParseQuery(query)
		if err != nil {
			return
		}
		_, _ = decodeAudit(q)
		if ns, _, _, err := splitLeasePath(nsPath); err == nil {
			_, _ = decodeList(ns, q, idem)
		}
	})
}

func marshal(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
