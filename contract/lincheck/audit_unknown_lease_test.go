package lincheck_test

import (
	"errors"
	"testing"
	"time"

	"github.com/leasestore/leasestore/audit"
	"github.com/leasestore/leasestore/contract/lincheck"
	"github.com/leasestore/leasestore/protocol"
)

// The record an operation of unknown outcome may have made carries the
// lease its request names where the request fixes it: the caller's own
// lease and token for a renew or release, the named token for a revoke
// (whose actor is the revoker, the lease anyone's).
func TestCheckAuditUnknownOutcomeRecordCarriesTheRequestsLease(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		req  lincheck.Request
		rec  audit.Record
		ok   bool
	}{
		{"a renew's record", lincheck.Request{Op: protocol.OpRenew, Owner: "w", Token: 5, TTL: time.Minute},
			audit.Record{Op: protocol.OpRenew, Status: protocol.StatusRenewed, Owner: "w", Token: 5, Actor: "w"}, true},
		{"a renew's record of another token", lincheck.Request{Op: protocol.OpRenew, Owner: "w", Token: 5, TTL: time.Minute},
			audit.Record{Op: protocol.OpRenew, Status: protocol.StatusRenewed, Owner: "w", Token: 6, Actor: "w"}, false},
		{"a release's record of another owner's lease", lincheck.Request{Op: protocol.OpRelease, Owner: "w", Token: 5},
			audit.Record{Op: protocol.OpRelease, Status: protocol.StatusReleased, Owner: "x", Token: 5, Actor: "w"}, false},
		{"a revoke's record", lincheck.Request{Op: protocol.OpRevoke, Owner: "ops"},
			audit.Record{Op: protocol.OpRevoke, Status: protocol.StatusRevoked, Owner: "w", Token: 9, Actor: "ops"}, true},
		{"a revoke's record of the named token", lincheck.Request{Op: protocol.OpRevoke, Owner: "ops", Token: 9},
			audit.Record{Op: protocol.OpRevoke, Status: protocol.StatusRevoked, Owner: "w", Token: 9, Actor: "ops"}, true},
		{"a revoke's record of another token than named", lincheck.Request{Op: protocol.OpRevoke, Owner: "ops", Token: 4},
			audit.Record{Op: protocol.OpRevoke, Status: protocol.StatusRevoked, Owner: "w", Token: 9, Actor: "ops"}, false},
	}
	for _, c := range cases {
		req := c.req
		req.Namespace, req.Key, req.RequestID = "ns", "k", "r1"
		rec := c.rec
		rec.ID, rec.Namespace, rec.Key, rec.RequestID = 1, "ns", "k", "r1"
		h := &lincheck.History{Ops: []lincheck.Operation{{Process: "p", Request: req, Start: 1, End: 2,
			Outcome: &lincheck.Outcome{Status: protocol.StatusUnavailable}}}}
		err := lincheck.CheckAudit(t.Context(), h, fixedTrail{rec})
		switch {
		case c.ok && err != nil:
			t.Errorf("%s under an unknown %s's request id: %v", c.name, req.Op, err)
		case !c.ok && !errors.Is(err, lincheck.ErrAuditMismatch):
			t.Errorf("%s (%s token %d) under an unknown %s's request id: CheckAudit answered %v, want %v",
				c.name, rec.Owner, rec.Token, req.Op, err, lincheck.ErrAuditMismatch)
		}
	}
}
