package protocol_test

import (
	"context"
	"errors"
	"testing"

	"github.com/leasestore/leasestore/protocol"
)

// Answer makes every answer a Runtime's: a refusal in the Result is an
// error matching its sentinel (carrying the result's lease), a failure's
// empty Result gets the error's status, an error that is no *Error is
// wrapped in one, and a status outside the vocabulary is unavailable.
func TestAnswerMakesEveryAnswerARuntimes(t *testing.T) {
	t.Parallel()
	k := protocol.Key{Namespace: "ns", Name: "k"}
	holder := &protocol.Lease{Key: k, Owner: "w1", Token: 7}
	for _, c := range []struct {
		name   string
		res    protocol.Result
		err    error
		status protocol.Status
		match  error
	}{
		{"success", protocol.Result{Status: protocol.StatusAcquired, Lease: holder}, nil, protocol.StatusAcquired, nil},
		{"conflict in the result", protocol.Result{Status: protocol.StatusConflict, Lease: holder}, nil, protocol.StatusConflict, protocol.ErrConflict},
		{"not_found in the result", protocol.Result{Status: protocol.StatusNotFound}, nil, protocol.StatusNotFound, protocol.ErrNotFound},
		{"timeout as an error", protocol.Result{}, &protocol.Error{Status: protocol.StatusTimeout}, protocol.StatusTimeout, protocol.ErrTimeout},
		{"context error", protocol.Result{}, context.DeadlineExceeded, protocol.StatusTimeout, protocol.ErrTimeout},
		{"plain error", protocol.Result{}, errors.New("boom"), protocol.StatusUnavailable, protocol.ErrUnavailable},
		{"unknown status", protocol.Result{Status: "maybe"}, nil, protocol.StatusUnavailable, protocol.ErrUnavailable},
		{"empty status", protocol.Result{}, nil, protocol.StatusUnavailable, protocol.ErrUnavailable},
	} {
		res, err := protocol.Answer(protocol.OpAcquire, k, c.res, c.err)
		if res.Status != c.status || (c.match == nil) != (err == nil) || (c.match != nil && !errors.Is(err, c.match)) {
			t.Errorf("%s: status %q, error %v; want %q and an error matching %v", c.name, res.Status, err, c.status, c.match)
		}
		if res.Op != protocol.OpAcquire || res.Key != k {
			t.Errorf("%s: op %q, key %v; want acquire and %v", c.name, res.Op, res.Key, k)
		}
		if c.err != nil && !errors.Is(err, c.err) {
			t.Errorf("%s: error %v does not wrap the store's %v", c.name, err, c.err)
		}
		var e *protocol.Error
		if err != nil && (!errors.As(err, &e) || protocol.StatusOf(err) != c.status) {
			t.Errorf("%s: error %v is not an *Error of status %q", c.name, err, c.status)
		}
		if c.status == protocol.StatusConflict && (e == nil || e.Lease != holder) {
			t.Errorf("%s: the conflict's error does not carry the holder's lease: %v", c.name, err)
		}
	}
}
