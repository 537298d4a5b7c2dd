package protocol

import (
	"context"
	"errors"
	"fmt"
)

// Answer returns res and err, what a [Store] answered to op on key, as a
// [Runtime] answers them, whatever the Store: a non-nil error exactly when
// the result's status is not a success, that error an *[Error] matching
// the status's sentinel, and the result's status the error's.
//
// A Runtime's answers pass unchanged. A [Backend] used directly as a Store
// (memstore's, an httpapi client) answers every protocol outcome in the
// Result with a nil error (conflict, not_found, stale_token, ...) and a
// failure (timeout, unavailable, closed) with an error and an empty Result:
// Answer makes the first an error (res.Err, carrying the lease the result
// does, as a conflict's holder) and gives the second its status
// ([StatusOf]; an error that is no *Error is wrapped in one). A status
// outside the vocabulary, or an error claiming a success, is unavailable.
// The result's Op and Key are set when empty.
//
// Code that acts on leases over any Store passes every answer through it
// before judging it ([Hold], [AcquireWait], [WatchLease], the scheduler),
// so that a refusal answered in a Result is never taken for a success.
func Answer(op Op, key Key, res Result, err error) (Result, error) {
	if res.Op == "" {
		res.Op = op
	}
	if res.Key == (Key{}) {
		res.Key = key
	}
	if err != nil {
		st := StatusOf(err)
		var e *Error
		if !errors.As(err, &e) || st.Success() || !st.Known() {
			if st.Success() || !st.Known() {
				st = StatusUnavailable
			}
			e = &Error{Op: op, Status: st, Key: key, Err: err}
			err = e
		}
		res.Status = st
		if res.Message == "" {
			res.Message = e.Detail()
		}
		return res, err
	}
	switch {
	case res.Status.Success():
		return res, nil
	case !res.Status.Known():
		msg := fmt.Sprintf("the store answered the status %q, which is not in the vocabulary", res.Status)
		res.Status, res.Message = StatusUnavailable, msg
		return res, &Error{Op: op, Status: StatusUnavailable, Key: key, Message: msg}
	}
	return res, res.Err()
}

// The calls of the code in this package that acts on leases over any
// Store: each answers through [Answer], so that no call site judges a
// backend's answer by its error alone.

func acquireOn(ctx context.Context, s Store, req AcquireRequest) (Result, error) {
	res, err := s.Acquire(ctx, req)
	return Answer(OpAcquire, req.Key, res, err)
}

func renewOn(ctx context.Context, s Store, req RenewRequest) (Result, error) {
	res, err := s.Renew(ctx, req)
	return Answer(OpRenew, req.Key, res, err)
}

func releaseOn(ctx context.Context, s Store, req ReleaseRequest) (Result, error) {
	res, err := s.Release(ctx, req)
	return Answer(OpRelease, req.Key, res, err)
}

func getOn(ctx context.Context, s Store, req GetRequest) (Result, error) {
	res, err := s.Get(ctx, req)
	return Answer(OpGet, req.Key, res, err)
}
