package audit_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/leasestore/leasestore/audit"
	"github.com/leasestore/leasestore/backendkit"
	"github.com/leasestore/leasestore/protocol"
)

// refusingReader refuses every read for the credentials or their
// permission, as a PostgreSQL store does once a DBA revoked the role's
// SELECT on the trail (SQLSTATE 42501), or an etcd cluster once the
// user's role lost read on the prefix.
type refusingReader struct{ why error }

func (r refusingReader) ReadAudit(context.Context, audit.Query) (audit.Page, error) {
	return audit.Page{}, backendkit.NewError(protocol.OpAudit, protocol.StatusUnavailable, r.why,
		"postgres: the DSN's role lacks a privilege: run GRANT SELECT ON TABLE leasestore_audit TO it")
}

// A watch whose reads are refused for the credentials or their permission
// (protocol.ErrUnauthenticated, ErrForbidden) yields the refusal once and
// ends, as it does for a cursor behind a prune and a closed store, and as
// httpapi.Client's Follow does on 401 and 403: a retry is refused the same
// way (protocol.ErrForbidden's doc: a caller that retries on unavailable
// should stop on these), and leasectl watch should exit 7 on it. It
// yielded the refusal every interval until its context ended, so `leasectl
// watch` on a direct store never ended.
func TestWatchEndsOnACredentialsRefusal(t *testing.T) {
	t.Parallel()
	for _, why := range []error{backendkit.Forbidden(errors.New("permission denied for table leasestore_audit")),
		backendkit.Unauthenticated(errors.New("password authentication failed"))} {
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
		var errs []error
		for _, err := range audit.Watch(ctx, refusingReader{why}, audit.Query{Namespace: "ns", Cursor: audit.EncodeCursor(3)},
			&audit.WatchConfig{Interval: time.Millisecond}) {
			errs = append(errs, err)
		}
		ended := ctx.Err() == nil
		cancel()
		if !ended || len(errs) != 1 {
			t.Errorf("watch refused (%v): yielded %d errors, ended by itself: %v; want the refusal once, then the end",
				why, len(errs), ended)
		}
	}
}
