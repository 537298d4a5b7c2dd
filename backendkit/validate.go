package backendkit

import (
	"fmt"

	"github.com/leasestore/leasestore/internal/textfield"
	"github.com/leasestore/leasestore/protocol"
)

// The Refuse functions let a backend used directly, not through a
// [protocol.Runtime], refuse what the runtime refuses, with the answer the
// runtime gives, before it reads or writes anything: every entry point
// that takes a request calls one first. The answer to an invalid request
// is a result with status invalid (its Op, Key and RequestID set, its
// Message the error's [protocol.Error.Detail]) and an *[protocol.Error]
// matching [protocol.ErrInvalid] whose cause is the request's Validate
// error. A change (acquire, renew, release, revoke) without a request id
// is refused too: the runtime makes one, a backend does not. A read (get,
// list) needs none. A valid request costs its Validate and no allocation.
// Subscribe and Namespaces, which take no request, call [RefuseSubscribe]
// and [RefuseNamespaces].

// noRequestID is the message of a change refused for want of a request id.
const noRequestID = "a backend makes no request ids: give each change its own, or wrap the backend with protocol.New, which does"

// RefuseAcquire answers req as the runtime answers an invalid acquire, or
// returns a zero result and a nil error when req is valid.
func RefuseAcquire(req protocol.AcquireRequest) (protocol.Result, error) {
	if err := req.Validate(); err != nil {
		return refuse(protocol.OpAcquire, req.Key, req.RequestID, err)
	}
	return protocol.Result{}, nil
}

// RefuseRenew is [RefuseAcquire] for a renew.
func RefuseRenew(req protocol.RenewRequest) (protocol.Result, error) {
	if err := req.Validate(); err != nil {
		return refuse(protocol.OpRenew, req.Key, req.RequestID, err)
	}
	return protocol.Result{}, nil
}

// RefuseRelease is [RefuseAcquire] for a release.
func RefuseRelease(req protocol.ReleaseRequest) (protocol.Result, error) {
	if err := req.Validate(); err != nil {
		return refuse(protocol.OpRelease, req.Key, req.RequestID, err)
	}
	return protocol.Result{}, nil
}

// RefuseRevoke is [RefuseAcquire] for a revoke.
func RefuseRevoke(req protocol.RevokeRequest) (protocol.Result, error) {
	if err := req.Validate(); err != nil {
		return refuse(protocol.OpRevoke, req.Key, req.RequestID, err)
	}
	return protocol.Result{}, nil
}

// readID stands in for the request id a read was sent without: the
// runtime would have made one, and a read records nothing.
const readID = "read"

// RefuseGet is [RefuseAcquire] for a get, which may come without a
// request id.
func RefuseGet(req protocol.GetRequest) (protocol.Result, error) {
	id := req.RequestID
	if id == "" {
		req.RequestID = readID
	}
	if err := req.Validate(); err != nil {
		return refuse(protocol.OpGet, req.Key, id, err)
	}
	return protocol.Result{}, nil
}

// RefuseList answers req as the runtime answers an invalid list (a
// malformed cursor, a limit out of range...), or returns a zero result and
// a nil error when req is valid. It may come without a request id.
func RefuseList(req protocol.ListRequest) (protocol.ListResult, error) {
	id := req.RequestID
	if id == "" {
		req.RequestID = readID
	}
	if err := req.Validate(); err != nil {
		res, e := refuse(protocol.OpList, protocol.Key{}, id, err)
		return protocol.ListResult{Status: res.Status, RequestID: res.RequestID, Message: res.Message}, e
	}
	return protocol.ListResult{}, nil
}

// AnswerReused, deferred by a change's entry point (acquire, renew,
// release, revoke) with pointers to its results, answers a request id
// reused with other parameters as the runtime does: a result with status
// invalid and no error ([Replay]'s) gets its Op, Key and RequestID set
// (op, key and requestID, the request's) and an *[protocol.Error]
// matching [protocol.ErrInvalid] with its message. Other answers pass
// unchanged. A [protocol.BulkRenewer] answers such a member in its result
// alone, as the runtime does.
func AnswerReused(op protocol.Op, key protocol.Key, requestID string, res *protocol.Result, err *error) {
	if *err != nil || res.Status != protocol.StatusInvalid {
		return
	}
	res.Op, res.Key, res.RequestID = op, key, requestID
	*err = &protocol.Error{Op: op, Status: protocol.StatusInvalid, Key: key, Lease: res.Lease, Message: res.Message}
}

// RefuseSubscribe returns the error [protocol.Runtime.Subscribe] answers
// a subscription to an invalid key with, or nil when key is valid. A
// [protocol.Notifier]'s Subscribe calls it first.
func RefuseSubscribe(key protocol.Key) error {
	if err := key.Validate(); err != nil {
		return &protocol.Error{Status: protocol.StatusInvalid, Key: key, Err: err}
	}
	return nil
}

// RefuseNamespaces returns an invalid-input error unless limit is within 1
// and [protocol.MaxListLimit] and after is "" or text a namespace can hold
// (after is a namespace or a place between two; GET /v1/namespaces checks
// it alike). A [protocol.NamespaceLister]'s Namespaces calls it first.
func RefuseNamespaces(after string, limit int) error {
	if err := CheckNamespacesLimit(limit); err != nil {
		return err
	}
	if after == "" {
		return nil
	}
	if err := textfield.Validate("after", after, protocol.MaxNamespaceLen); err != nil {
		return &protocol.Error{Op: protocol.OpNamespaces, Status: protocol.StatusInvalid, Err: err}
	}
	return nil
}

// refuse is the runtime's answer to an invalid request: op of key, with
// request id requestID, whose Validate returned err.
func refuse(op protocol.Op, key protocol.Key, requestID string, err error) (protocol.Result, error) {
	e := &protocol.Error{Op: op, Status: protocol.StatusInvalid, Key: key, Err: err}
	if requestID == "" && op != protocol.OpGet && op != protocol.OpList {
		e.Message = noRequestID
	}
	return protocol.Result{Op: op, Status: protocol.StatusInvalid, Key: key, RequestID: requestID, Message: e.Detail()}, e
}

// RenewMany is a [protocol.BulkRenewer]'s RenewMany with the runtime's
// checks around renew, the backend's own: more than [protocol.MaxRenewMany]
// requests are refused as a whole (no results, an invalid error); a request
// that [RefuseRenew] refuses answers invalid in its result, unsent; renew
// gets the others in order (reqs itself when all are valid) and is not
// called when there are none. renew's error, with no results, is the
// call's.
func RenewMany(reqs []protocol.RenewRequest, renew func([]protocol.RenewRequest) ([]protocol.Result, error)) ([]protocol.Result, error) {
	if len(reqs) > protocol.MaxRenewMany {
		return nil, &protocol.Error{Op: protocol.OpRenew, Status: protocol.StatusInvalid,
			Message: fmt.Sprintf("renew many: %d leases, at most %d in one call", len(reqs), protocol.MaxRenewMany)}
	}
	first := -1 // the first invalid request
	for i, req := range reqs {
		if req.Validate() != nil {
			first = i
			break
		}
	}
	if first < 0 {
		return renew(reqs)
	}
	out := make([]protocol.Result, len(reqs))
	send := make([]protocol.RenewRequest, 0, len(reqs)-1)
	idx := make([]int, 0, len(reqs)-1)
	for i, req := range reqs {
		if i >= first {
			if res, err := RefuseRenew(req); err != nil {
				out[i] = res
				continue
			}
		}
		send = append(send, req)
		idx = append(idx, i)
	}
	if len(send) == 0 {
		return out, nil
	}
	got, err := renew(send)
	if err != nil {
		return nil, err
	}
	if len(got) != len(send) {
		return nil, NewError(protocol.OpRenew, protocol.StatusUnavailable, nil,
			"renew many: %d results for %d renewals", len(got), len(send))
	}
	for j, i := range idx {
		out[i] = got[j]
	}
	return out, nil
}
