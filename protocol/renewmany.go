package protocol

import (
	"context"
	"fmt"
	"slices"
	"time"
)

// MaxRenewMany bounds the leases of one [Runtime.RenewMany] call.
const MaxRenewMany = 10000

// BulkRenewer is implemented by backends that renew many leases in one
// round trip (PostgreSQL: one statement; SQLite: one transaction; the
// in-memory backend). The runtime calls it with requests that passed
// validation and carry request ids, under one deadline.
//
// RenewMany renews each request as [Backend.Renew] would, in the order
// given (two requests for one key behave as if sent one after the other):
// each has its own outcome, its own audit record and its own idempotency
// by request id, and one lease's refusal never fails the others. It returns
// one [Result] per request, in order, and a nil error; it returns an error
// (and no results) only when it could not answer at all, as Renew does:
// then some renewals may have taken effect, which a retry with the same
// request ids tells.
//
// [*Runtime] implements it too (validating the requests and filling in
// request ids first), so code that holds a [Store] renews in bulk with
// store.(BulkRenewer) when the store offers it.
type BulkRenewer interface {
	RenewMany(ctx context.Context, reqs []RenewRequest) ([]Result, error)
}

var _ BulkRenewer = (*Runtime)(nil)

// RenewMany renews several leases at once, typically every lease a worker
// holds (as etcd's keep-alive does for a lease shared by many keys): one
// round trip when the backend implements [BulkRenewer], else one Renew per
// lease, in order, under one deadline. Each request is a Renew of its own:
// validated (an invalid one answers invalid and is not sent), given a
// request id when it has none (in its result: reqs is not changed, so a
// slice renewed every round gets fresh ids each time), audited, idempotent, observed and recorded
// by the audit hook like a Renew.
//
// The results are one per request, in order, each with its status (renewed,
// or the refusal: stale_token, not_owner, expired, not_found, invalid) and
// the lease; Result.Err() gives a request's outcome as an error. The error
// is nil when the store answered; when it could not (timeout, unavailable,
// closed), every request sent has that status in its result, and the error
// is the *Error of the first. A backend whose renewals travel apart (etcd,
// a served store split over requests, PostgreSQL's statements of a
// thousand and the renewals it runs again alone) may also answer some
// requests timeout or unavailable in their results with a nil error: each
// request fails alone, so check every result's status. More than [MaxRenewMany] requests are
// refused as a whole (invalid, nothing sent; the observer hears one renew
// with status invalid). RenewMany is safe for concurrent use.
func (r *Runtime) RenewMany(ctx context.Context, reqs []RenewRequest) ([]Result, error) {
	start := time.Now()
	if len(reqs) > MaxRenewMany {
		msg := fmt.Sprintf("renew many: %d leases, at most %d in one call", len(reqs), MaxRenewMany)
		r.observe(ctx, OpRenew, StatusInvalid, false, start) // one event, as for any other refused call
		return nil, &Error{Op: OpRenew, Status: StatusInvalid, Message: msg}
	}
	reqs = slices.Clone(reqs) // the ids made here are this call's, not the caller's next call's
	results := make([]Result, len(reqs))
	send := make([]RenewRequest, 0, len(reqs))
	idx := make([]int, 0, len(reqs))
	for i, req := range reqs {
		if req.RequestID == "" {
			req.RequestID = r.newReqID()
		}
		reqs[i] = req
		if err := req.Validate(); err != nil {
			results[i] = Result{Status: StatusInvalid, Message: err.Error()}
			continue
		}
		send = append(send, req)
		idx = append(idx, i)
	}
	var failed *Error
	if len(send) > 0 {
		got, fault := r.renewMany(ctx, send)
		for j, i := range idx {
			results[i] = got[j]
			if !got[j].Status.Success() && !got[j].Status.Known() {
				results[i] = Result{Status: StatusUnavailable, Message: fmt.Sprintf("backend %s returned unknown status %q", r.backend.Name(), got[j].Status)}
			}
		}
		if fault != nil {
			failed = &Error{Op: OpRenew, Status: fault.Status, Key: reqs[idx[0]].Key, Message: fault.Message, Err: fault.Err}
		}
	}
	for i := range results {
		res := &results[i]
		res.Op, res.Key, res.RequestID = OpRenew, reqs[i].Key, reqs[i].RequestID
		if res.Message == "" {
			res.Message = describe(OpRenew, *res)
		}
		r.observe(ctx, OpRenew, res.Status, res.Replayed, start)
		r.recordChange(ctx, *res, reqs[i].Owner, "")
	}
	r.sweep.poke()
	if failed != nil {
		return results, failed
	}
	return results, nil
}

// renewMany sends valid requests to the backend and returns one result per
// request; fault is set when the store could not answer the call as a
// whole (every result then has its status).
func (r *Runtime) renewMany(ctx context.Context, reqs []RenewRequest) (results []Result, fault *Error) {
	fail := func(f *Error) ([]Result, *Error) {
		res, _ := faulted(f)
		out := make([]Result, len(reqs))
		for i := range out {
			out[i] = res
		}
		return out, f
	}
	if !r.begin() {
		return fail(&Error{Status: StatusClosed, Message: "the store was closed"})
	}
	defer r.end()
	ctx, cancel := r.withDeadline(ctx)
	defer cancel()
	if ctx.Err() != nil {
		return fail(interrupted(ctx, OpRenew, "", nil))
	}
	if br, ok := r.backend.(BulkRenewer); ok {
		got, err := br.RenewMany(ctx, reqs)
		if err != nil {
			return fail(failure(ctx, OpRenew, err))
		}
		if len(got) != len(reqs) {
			return fail(&Error{Status: StatusUnavailable,
				Message: fmt.Sprintf("backend %s answered %d results for %d renewals", r.backend.Name(), len(got), len(reqs))})
		}
		return got, nil
	}
	results = make([]Result, len(reqs))
	for i, req := range reqs {
		res, err := r.backend.Renew(ctx, req)
		if err != nil {
			res, _ = faulted(failure(ctx, OpRenew, err))
		}
		results[i] = res
	}
	return results, nil
}
