package protocol

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasestore/leasestore/internal/listcursor"
)

// fakeBackend is a test-only Backend. It records every call it receives,
// with the deadline its context carried, and answers through handle (keyed
// operations), list and health; by default it answers each operation's
// success with a lease built from the request.
type fakeBackend struct {
	handle   func(ctx context.Context, op Op, req any) (Result, error)
	list     func(ctx context.Context, req ListRequest) (ListResult, error)
	health   func(ctx context.Context) error
	closeErr error

	mu       sync.Mutex
	calls    []fakeCall
	closes   int
	closeCtx context.Context
	// closeCtxErr and closeCtxBounded describe closeCtx when Close was called.
	closeCtxErr     error
	closeCtxBounded bool
}

type fakeCall struct {
	op          Op
	req         any
	deadline    time.Time
	hasDeadline bool
}

var _ Backend = (*fakeBackend)(nil)

var fakeNow = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

func (b *fakeBackend) record(ctx context.Context, op Op, req any) {
	dl, ok := ctx.Deadline()
	b.mu.Lock()
	defer b.mu.Unlock()
	b.calls = append(b.calls, fakeCall{op: op, req: req, deadline: dl, hasDeadline: ok})
}

func (b *fakeBackend) callList() []fakeCall {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]fakeCall(nil), b.calls...)
}

func (b *fakeBackend) closeCount() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.closes
}

func (b *fakeBackend) answer(ctx context.Context, op Op, req any) (Result, error) {
	b.record(ctx, op, req)
	if b.handle != nil {
		return b.handle(ctx, op, req)
	}
	return defaultAnswer(op, req), nil
}

// defaultAnswer is the success a correct backend would give for req.
func defaultAnswer(op Op, req any) Result {
	switch r := req.(type) {
	case AcquireRequest:
		return Result{Status: StatusAcquired, Lease: fakeLease(r.Key, r.Owner, 1)}
	case RenewRequest:
		return Result{Status: StatusRenewed, Lease: fakeLease(r.Key, r.Owner, r.Token)}
	case ReleaseRequest:
		return Result{Status: StatusReleased, Lease: fakeLease(r.Key, r.Owner, r.Token)}
	case GetRequest:
		return Result{Status: StatusFound, Lease: fakeLease(r.Key, "holder", 1)}
	case RevokeRequest:
		return Result{Status: StatusRevoked, Lease: fakeLease(r.Key, "holder", 1)}
	}
	panic(fmt.Sprintf("fakeBackend: no default answer for %s %T", op, req))
}

func fakeLease(k Key, owner string, token int64) *Lease {
	return &Lease{Key: k, Owner: owner, Token: token, AcquiredAt: fakeNow, RenewedAt: fakeNow,
		ExpiresAt: fakeNow.Add(time.Minute), Version: LeaseFormatVersion}
}

func (b *fakeBackend) Name() string { return "fake" }
func (b *fakeBackend) Acquire(ctx context.Context, req AcquireRequest) (Result, error) {
	return b.answer(ctx, OpAcquire, req)
}
func (b *fakeBackend) Renew(ctx context.Context, req RenewRequest) (Result, error) {
	return b.answer(ctx, OpRenew, req)
}
func (b *fakeBackend) Release(ctx context.Context, req ReleaseRequest) (Result, error) {
	return b.answer(ctx, OpRelease, req)
}
func (b *fakeBackend) Get(ctx context.Context, req GetRequest) (Result, error) {
	return b.answer(ctx, OpGet, req)
}
func (b *fakeBackend) Revoke(ctx context.Context, req RevokeRequest) (Result, error) {
	return b.answer(ctx, OpRevoke, req)
}
func (b *fakeBackend) List(ctx context.Context, req ListRequest) (ListResult, error) {
	b.record(ctx, OpList, req)
	if b.list != nil {
		return b.list(ctx, req)
	}
	return ListResult{Status: StatusFound, Leases: []Lease{*fakeLease(Key{Namespace: req.Namespace, Name: "a"}, "o", 1)}}, nil
}
func (b *fakeBackend) Health(ctx context.Context) error {
	b.record(ctx, OpHealth, nil)
	if b.health != nil {
		return b.health(ctx)
	}
	return nil
}
func (b *fakeBackend) Close(ctx context.Context) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closes++
	b.closeCtx = ctx
	b.closeCtxErr = ctx.Err()
	_, b.closeCtxBounded = ctx.Deadline()
	return b.closeErr
}

// blocker makes every call of one backend operation stick until the test
// lets it go, ignoring its context as a wedged driver call would. Other
// operations answer at once.
type blocker struct {
	op      Op
	entered chan struct{}
	release chan struct{}
}

func newBlocker(op Op) *blocker {
	return &blocker{op: op, entered: make(chan struct{}, 16), release: make(chan struct{})}
}

func (bl *blocker) handle(_ context.Context, op Op, req any) (Result, error) {
	if op == bl.op {
		bl.entered <- struct{}{}
		<-bl.release
	}
	return defaultAnswer(op, req), nil
}

// waitEntered waits until a blocked operation is inside the backend.
func (bl *blocker) waitEntered(t *testing.T) {
	t.Helper()
	select {
	case <-bl.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the operation never reached the backend")
	}
}

// validRequests returns one valid request per keyed operation, with ids.
func validRequests() (AcquireRequest, RenewRequest, ReleaseRequest, GetRequest, ListRequest, RevokeRequest) {
	k := Key{Namespace: "ns", Name: "job"}
	return AcquireRequest{Key: k, Owner: "w1", TTL: time.Minute, RequestID: "acq-1"},
		RenewRequest{Key: k, Owner: "w1", Token: 1, TTL: time.Minute, RequestID: "ren-1"},
		ReleaseRequest{Key: k, Owner: "w1", Token: 1, RequestID: "rel-1"},
		GetRequest{Key: k, RequestID: "get-1"},
		ListRequest{Namespace: "ns", RequestID: "list-1"},
		RevokeRequest{Key: k, Actor: "ops", Reason: "stuck", RequestID: "rev-1"}
}

// opResult is one operation's outcome, whatever its result type.
type opResult struct {
	op       Op
	status   Status
	reqID    string
	replayed bool
	err      error
}

// runAll sends each request through rt and returns the outcomes in order.
func runAll(ctx context.Context, rt *Runtime, acq AcquireRequest, ren RenewRequest, rel ReleaseRequest,
	get GetRequest, list ListRequest, rev RevokeRequest) []opResult {
	var out []opResult
	add := func(res Result, err error) {
		out = append(out, opResult{res.Op, res.Status, res.RequestID, res.Replayed, err})
	}
	add(rt.Acquire(ctx, acq))
	add(rt.Renew(ctx, ren))
	add(rt.Release(ctx, rel))
	add(rt.Get(ctx, get))
	lr, err := rt.List(ctx, list)
	out = append(out, opResult{OpList, lr.Status, lr.RequestID, false, err})
	add(rt.Revoke(ctx, rev))
	return out
}

// checkErrMatchesStatus asserts the Store contract: a nil error exactly for a
// success, otherwise an *Error of that status matching exactly one sentinel.
func checkErrMatchesStatus(t *testing.T, what string, status Status, err error) {
	t.Helper()
	if status.Success() {
		if err != nil {
			t.Errorf("%s: status %s with error %v", what, status, err)
		}
		return
	}
	var e *Error
	if !errors.As(err, &e) || e.Status != status {
		t.Errorf("%s: status %s with error %#v, want an *Error of that status", what, status, err)
		return
	}
	var matched []Status
	for _, s := range Statuses {
		if sent := s.Sentinel(); sent != nil && errors.Is(err, sent) {
			matched = append(matched, s)
		}
	}
	if len(matched) != 1 || matched[0] != status {
		t.Errorf("%s: error %q matches the sentinels of %v, want exactly %s", what, err, matched, status)
	}
}

func TestRuntimeInvalidNeverReachesBackend(t *testing.T) {
	b := &fakeBackend{}
	var events []OperationEvent
	rt := New(b, &Config{Observer: ObserverFunc(func(_ context.Context, ev OperationEvent) { events = append(events, ev) })})
	defer rt.Close(context.Background())

	acq, ren, rel, get, list, rev := validRequests()
	acq.TTL = 0
	ren.Token = 0
	rel.Owner = ""
	get.Key.Name = "bad\nname"
	list.Limit = -1
	rev.Reason = ""
	outs := runAll(context.Background(), rt, acq, ren, rel, get, list, rev)
	// A request id the caller chose is validated too.
	res, err := rt.Get(context.Background(), GetRequest{Key: get.Key, RequestID: "id\x00"})
	outs = append(outs, opResult{res.Op, res.Status, res.RequestID, false, err})

	for _, o := range outs {
		if o.status != StatusInvalid || !errors.Is(o.err, ErrInvalid) {
			t.Errorf("%s: status %q, error %v; want invalid", o.op, o.status, o.err)
		}
		checkErrMatchesStatus(t, string(o.op), o.status, o.err)
		if o.reqID == "" {
			t.Errorf("%s: no request id reported for an invalid request", o.op)
		}
	}
	if calls := b.callList(); len(calls) != 0 {
		t.Fatalf("the backend received %d invalid requests, first %+v", len(calls), calls[0])
	}
	if len(events) != len(outs) {
		t.Fatalf("observer saw %d events for %d invalid operations", len(events), len(outs))
	}
	for i, ev := range events {
		if ev.Status != StatusInvalid || ev.Op != outs[i].op {
			t.Errorf("event %d = %+v, want %s invalid", i, ev, outs[i].op)
		}
	}
	// The validation error is the cause.
	var e *Error
	_, err = rt.Acquire(context.Background(), acq)
	if !errors.As(err, &e) || e.Err == nil || !strings.Contains(e.Error(), "ttl:") || e.Key != acq.Key || e.Op != OpAcquire {
		t.Errorf("invalid acquire error = %#v, want the ttl problem as cause, the key and the op", err)
	}
}

func TestRuntimeRequestIDs(t *testing.T) {
	t.Run("generated when empty and reported", func(t *testing.T) {
		b := &fakeBackend{}
		n := 0
		rt := New(b, &Config{NewRequestID: func() string { n++; return fmt.Sprintf("gen-%d", n) }})
		defer rt.Close(context.Background())
		acq, ren, rel, get, list, rev := validRequests()
		acq.RequestID, ren.RequestID, rel.RequestID, get.RequestID, list.RequestID, rev.RequestID = "", "", "", "", "", ""
		outs := runAll(context.Background(), rt, acq, ren, rel, get, list, rev)
		calls := b.callList()
		if len(calls) != len(outs) {
			t.Fatalf("backend received %d calls, want %d", len(calls), len(outs))
		}
		for i, o := range outs {
			want := fmt.Sprintf("gen-%d", i+1)
			if !o.status.Success() || o.err != nil {
				t.Errorf("%s without a request id: %s, %v; want success", o.op, o.status, o.err)
			}
			if o.reqID != want {
				t.Errorf("%s reported request id %q, want %q", o.op, o.reqID, want)
			}
			if got := requestIDOf(calls[i].req); got != want {
				t.Errorf("%s: backend saw request id %q, want %q", o.op, got, want)
			}
		}
	})
	t.Run("caller's id kept", func(t *testing.T) {
		b := &fakeBackend{}
		rt := New(b, &Config{NewRequestID: func() string { t.Error("generated an id although one was given"); return "x" }})
		defer rt.Close(context.Background())
		acq, ren, rel, get, list, rev := validRequests()
		outs := runAll(context.Background(), rt, acq, ren, rel, get, list, rev)
		want := []string{acq.RequestID, ren.RequestID, rel.RequestID, get.RequestID, list.RequestID, rev.RequestID}
		for i, o := range outs {
			if o.reqID != want[i] || requestIDOf(b.callList()[i].req) != want[i] {
				t.Errorf("%s: reported %q, backend saw %q; want %q", o.op, o.reqID, requestIDOf(b.callList()[i].req), want[i])
			}
		}
	})
	t.Run("default generator", func(t *testing.T) {
		rt := New(&fakeBackend{}, nil)
		defer rt.Close(context.Background())
		acq, _, _, _, _, _ := validRequests()
		acq.RequestID = ""
		hex32 := regexp.MustCompile(`^[0-9a-f]{32}$`)
		seen := map[string]bool{}
		for range 3 {
			res, err := rt.Acquire(context.Background(), acq)
			if err != nil || !hex32.MatchString(res.RequestID) {
				t.Fatalf("Acquire without id = %q, %v; want success with 32 hex digits", res.RequestID, err)
			}
			if seen[res.RequestID] {
				t.Fatalf("request id %q generated twice", res.RequestID)
			}
			seen[res.RequestID] = true
		}
	})
}

func requestIDOf(req any) string {
	switch r := req.(type) {
	case AcquireRequest:
		return r.RequestID
	case RenewRequest:
		return r.RequestID
	case ReleaseRequest:
		return r.RequestID
	case GetRequest:
		return r.RequestID
	case ListRequest:
		return r.RequestID
	case RevokeRequest:
		return r.RequestID
	}
	return ""
}

func TestRuntimeDeadlines(t *testing.T) {
	t.Run("default applied", func(t *testing.T) {
		for _, tc := range []struct {
			cfg  *Config
			want time.Duration
		}{{nil, DefaultTimeout}, {&Config{DefaultTimeout: 1500 * time.Millisecond}, 1500 * time.Millisecond}} {
			b := &fakeBackend{}
			rt := New(b, tc.cfg)
			acq, ren, rel, get, list, rev := validRequests()
			before := time.Now()
			runAll(context.Background(), rt, acq, ren, rel, get, list, rev)
			if err := rt.Health(context.Background()); err != nil {
				t.Fatalf("Health: %v", err)
			}
			after := time.Now()
			for _, c := range b.callList() {
				if !c.hasDeadline {
					t.Errorf("%s: backend saw no deadline", c.op)
					continue
				}
				if c.deadline.Before(before.Add(tc.want)) || c.deadline.After(after.Add(tc.want)) {
					t.Errorf("%s: deadline %v after the call began, want %v", c.op, c.deadline.Sub(before), tc.want)
				}
			}
			if err := rt.Close(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
	})
	t.Run("caller's deadline kept", func(t *testing.T) {
		b := &fakeBackend{}
		rt := New(b, &Config{DefaultTimeout: time.Second})
		defer rt.Close(context.Background())
		// A longer and a shorter deadline than the default are both kept as given.
		var wants []time.Time
		for _, d := range []time.Duration{time.Hour, 700 * time.Millisecond} {
			want := time.Now().Add(d)
			wants = append(wants, want)
			ctx, cancel := context.WithDeadline(context.Background(), want)
			acq, ren, rel, get, list, rev := validRequests()
			runAll(ctx, rt, acq, ren, rel, get, list, rev)
			if err := rt.Health(ctx); err != nil {
				t.Fatalf("Health: %v", err)
			}
			cancel()
		}
		calls := b.callList()
		if len(calls) != 14 {
			t.Fatalf("%d backend calls, want 14", len(calls))
		}
		for i, c := range calls {
			if want := wants[i/7]; !c.hasDeadline || !c.deadline.Equal(want) {
				t.Errorf("%s: backend saw deadline %v (set: %v), want the caller's %v", c.op, c.deadline, c.hasDeadline, want)
			}
		}
	})
}

func TestRuntimeTimeouts(t *testing.T) {
	driverErr := errors.New("driver: conn closed")
	waitThen := func(ret func(ctx context.Context) error) func(context.Context, Op, any) (Result, error) {
		return func(ctx context.Context, _ Op, _ any) (Result, error) {
			<-ctx.Done()
			return Result{}, ret(ctx)
		}
	}
	tests := []struct {
		name      string
		handle    func(context.Context, Op, any) (Result, error)
		cancel    bool  // cancel instead of a deadline
		wantCause error // errors.Is(err, wantCause)
	}{
		{"context error", waitThen(func(ctx context.Context) error { return ctx.Err() }), false, context.DeadlineExceeded},
		{"wrapped context error", waitThen(func(ctx context.Context) error { return fmt.Errorf("query: %w", ctx.Err()) }), false, context.DeadlineExceeded},
		{"driver error after the deadline", waitThen(func(context.Context) error { return driverErr }), false, driverErr},
		{"backend unavailable after the deadline", waitThen(func(context.Context) error {
			return newError(OpAcquire, StatusUnavailable, driverErr, "fake: connection lost")
		}), false, driverErr},
		{"backend error of unknown status after the deadline", waitThen(func(context.Context) error {
			return &Error{Status: "weird", Err: driverErr}
		}), false, driverErr},
		{"cancelled", waitThen(func(ctx context.Context) error { return ctx.Err() }), true, context.Canceled},
		{"driver error after cancel", waitThen(func(context.Context) error { return driverErr }), true, driverErr},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var ctx context.Context
			var cancel context.CancelFunc
			handle := tc.handle
			if tc.cancel {
				// The caller cancels while the operation is inside the backend.
				ctx, cancel = context.WithCancel(context.Background())
				handle = func(ctx context.Context, op Op, req any) (Result, error) {
					cancel()
					return tc.handle(ctx, op, req)
				}
			} else {
				ctx, cancel = context.WithTimeout(context.Background(), 20*time.Millisecond)
			}
			defer cancel()
			rt := New(&fakeBackend{handle: handle}, nil)
			defer rt.Close(context.Background())
			acq, _, _, _, _, _ := validRequests()
			res, err := rt.Acquire(ctx, acq)
			if res.Status != StatusTimeout {
				t.Fatalf("status %q (%v), want timeout", res.Status, err)
			}
			checkErrMatchesStatus(t, tc.name, res.Status, err)
			if !errors.Is(err, tc.wantCause) {
				t.Errorf("error %q does not unwrap to %v", err, tc.wantCause)
			}
			if res.RequestID != acq.RequestID || res.Op != OpAcquire {
				t.Errorf("timeout result %+v lacks the op or request id", res)
			}
		})
	}
	t.Run("default deadline passes", func(t *testing.T) {
		b := &fakeBackend{handle: waitThen(func(ctx context.Context) error { return ctx.Err() })}
		rt := New(b, &Config{DefaultTimeout: 20 * time.Millisecond})
		defer rt.Close(context.Background())
		_, ren, _, _, _, _ := validRequests()
		res, err := rt.Renew(context.Background(), ren)
		if res.Status != StatusTimeout || !errors.Is(err, ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Renew = %q, %v; want timeout from the default deadline", res.Status, err)
		}
	})
	t.Run("deadline passed before the call", func(t *testing.T) {
		b := &fakeBackend{}
		rt := New(b, nil)
		defer rt.Close(context.Background())
		ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
		defer cancel()
		_, _, _, get, _, _ := validRequests()
		res, err := rt.Get(ctx, get)
		if res.Status != StatusTimeout || !errors.Is(err, ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Get = %q, %v; want timeout", res.Status, err)
		}
		if n := len(b.callList()); n != 0 {
			t.Errorf("the backend was called %d times with an expired context", n)
		}
		if err := rt.Health(ctx); !errors.Is(err, ErrTimeout) {
			t.Errorf("Health with an expired context = %v, want timeout", err)
		}
	})
}

type driverError struct{ code string }

func (e *driverError) Error() string { return "driver: code " + e.code }

func TestRuntimeBackendErrors(t *testing.T) {
	dErr := &driverError{code: "57P01"}
	tests := []struct {
		name       string
		res        Result
		err        error
		wantStatus Status
		wantCause  error
	}{
		{"unknown error", Result{}, dErr, StatusUnavailable, dErr},
		{"wrapped unknown error", Result{}, fmt.Errorf("fake: query: %w", dErr), StatusUnavailable, dErr},
		{"backend unavailable", Result{}, newError(OpAcquire, StatusUnavailable, dErr, "fake: down"), StatusUnavailable, dErr},
		{"backend timeout before the deadline", Result{}, newError(OpAcquire, StatusTimeout, dErr, "fake: busy"), StatusTimeout, dErr},
		{"backend error of a success status", Result{}, &Error{Status: StatusAcquired, Err: dErr}, StatusUnavailable, dErr},
		{"backend error of unknown status", Result{}, &Error{Status: "weird", Err: dErr}, StatusUnavailable, dErr},
		{"backend error without status", Result{}, &Error{Err: dErr}, StatusUnavailable, dErr},
		{"unknown status in the result", Result{Status: "ok"}, nil, StatusUnavailable, nil},
		{"empty result", Result{}, nil, StatusUnavailable, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := &fakeBackend{handle: func(context.Context, Op, any) (Result, error) { return tc.res, tc.err }}
			rt := New(b, nil)
			defer rt.Close(context.Background())
			acq, _, _, _, _, _ := validRequests()
			res, err := rt.Acquire(context.Background(), acq)
			if res.Status != tc.wantStatus {
				t.Fatalf("status %q (%v), want %q", res.Status, err, tc.wantStatus)
			}
			checkErrMatchesStatus(t, tc.name, res.Status, err)
			if tc.wantCause != nil {
				var de *driverError
				if !errors.Is(err, tc.wantCause) || !errors.As(err, &de) || de.code != "57P01" {
					t.Errorf("error %q does not unwrap to the driver error", err)
				}
				if n := strings.Count(err.Error(), "57P01"); n != 1 {
					t.Errorf("error %q mentions the cause %d times, want once", err, n)
				}
				if !strings.Contains(res.Message, "57P01") {
					t.Errorf("result message %q does not mention the cause", res.Message)
				}
			}
		})
	}
	t.Run("list", func(t *testing.T) {
		b := &fakeBackend{list: func(context.Context, ListRequest) (ListResult, error) { return ListResult{}, dErr }}
		rt := New(b, nil)
		defer rt.Close(context.Background())
		_, _, _, _, list, _ := validRequests()
		res, err := rt.List(context.Background(), list)
		if res.Status != StatusUnavailable || !errors.Is(err, dErr) || res.RequestID != list.RequestID {
			t.Fatalf("List = %+v, %v; want unavailable wrapping the driver error", res, err)
		}
		checkErrMatchesStatus(t, "list", res.Status, err)
	})
	t.Run("health", func(t *testing.T) {
		b := &fakeBackend{health: func(context.Context) error { return dErr }}
		rt := New(b, nil)
		defer rt.Close(context.Background())
		err := rt.Health(context.Background())
		var e *Error
		if !errors.As(err, &e) || e.Status != StatusUnavailable || e.Op != OpHealth || !errors.Is(err, dErr) {
			t.Fatalf("Health = %#v, want unavailable wrapping the driver error", err)
		}
		checkErrMatchesStatus(t, "health", e.Status, err)
	})
}

func TestRuntimePassesOutcomes(t *testing.T) {
	holder := fakeLease(Key{Namespace: "ns", Name: "job"}, "worker-3", 41)
	outcomes := []Status{StatusConflict, StatusStaleToken, StatusNotOwner, StatusExpired, StatusNotFound, StatusInvalid}
	for _, st := range outcomes {
		b := &fakeBackend{handle: func(context.Context, Op, any) (Result, error) {
			return Result{Status: st, Lease: holder}, nil
		}}
		rt := New(b, nil)
		acq, _, _, _, _, _ := validRequests()
		res, err := rt.Acquire(context.Background(), acq)
		if res.Status != st || res.Lease != holder {
			t.Errorf("backend said %s: runtime answered %+v", st, res)
		}
		checkErrMatchesStatus(t, string(st), res.Status, err)
		var e *Error
		if errors.As(err, &e) && (e.Lease != holder || e.Key != acq.Key || e.Op != OpAcquire || e.Message != res.Message) {
			t.Errorf("%s error = %+v, want the holder, key, op and message", st, e)
		}
		if res.Message == "" {
			t.Errorf("%s: no default message", st)
		}
		if err := rt.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
	}

	// The conflict message names the holder.
	b := &fakeBackend{handle: func(context.Context, Op, any) (Result, error) {
		return Result{Status: StatusConflict, Lease: holder}, nil
	}}
	rt := New(b, nil)
	defer rt.Close(context.Background())
	acq, _, _, _, list, _ := validRequests()
	res, _ := rt.Acquire(context.Background(), acq)
	if want := "held by worker-3 with token 41 until 2030-01-02T03:05:05Z"; res.Message != want {
		t.Errorf("conflict message %q, want %q", res.Message, want)
	}
	// A backend's own message is kept.
	b.handle = func(context.Context, Op, any) (Result, error) {
		return Result{Status: StatusAcquired, Lease: holder, Replayed: true, Message: "from backend"}, nil
	}
	res, err := rt.Acquire(context.Background(), acq)
	if err != nil || res.Message != "from backend" || !res.Replayed {
		t.Errorf("Acquire = %+v, %v; want the backend's message and the replay flag", res, err)
	}

	// List passes the page through, its cursor bound to the list.
	b.list = func(context.Context, ListRequest) (ListResult, error) {
		return ListResult{Status: StatusFound, Leases: []Lease{*holder}, NextCursor: listcursor.Encode("job")}, nil
	}
	lr, err := rt.List(context.Background(), list)
	if name, _ := listcursor.Decode(lr.NextCursor, MaxNameLen); err != nil || lr.Status != StatusFound || len(lr.Leases) != 1 ||
		lr.Leases[0] != *holder || name != "job" || lr.RequestID != list.RequestID ||
		listcursor.Check(lr.NextCursor, list.cursorScope(), MaxNameLen) != nil ||
		listcursor.Check(lr.NextCursor, listcursor.Scope{Namespace: list.Namespace + "x"}, MaxNameLen) == nil {
		t.Errorf("List = %+v, %v; want the page, its cursor after job bound to the list", lr, err)
	}
}

// eventLog collects observer events; it is safe for concurrent use.
type eventLog struct {
	mu     sync.Mutex
	events []OperationEvent
}

func (l *eventLog) ObserveOperation(_ context.Context, ev OperationEvent) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, ev)
}

func (l *eventLog) all() []OperationEvent {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]OperationEvent(nil), l.events...)
}

// changeLog collects audit hook calls; it is safe for concurrent use.
type changeLog struct {
	mu      sync.Mutex
	changes []StateChange
}

func (l *changeLog) RecordStateChange(_ context.Context, ch StateChange) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.changes = append(l.changes, ch)
}

func (l *changeLog) all() []StateChange {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]StateChange(nil), l.changes...)
}

func TestRuntimeObserver(t *testing.T) {
	replay := false
	fail := error(nil)
	b := &fakeBackend{}
	b.handle = func(_ context.Context, op Op, req any) (Result, error) {
		if fail != nil {
			return Result{}, fail
		}
		res := defaultAnswer(op, req)
		res.Replayed = replay
		return res, nil
	}
	obs := &eventLog{}
	rt := New(b, &Config{Observer: obs})
	acq, ren, rel, get, list, rev := validRequests()
	ctx := context.Background()

	runAll(ctx, rt, acq, ren, rel, get, list, rev)
	replay = true
	_, _ = rt.Renew(ctx, ren)
	replay = false
	fail = errors.New("driver: down")
	_, _ = rt.Release(ctx, rel)
	fail = nil
	bad := acq
	bad.Owner = ""
	_, _ = rt.Acquire(ctx, bad)
	_ = rt.Health(ctx)
	b.health = func(context.Context) error { return errors.New("driver: down") }
	_ = rt.Health(ctx)
	if err := rt.Close(ctx); err != nil {
		t.Fatal(err)
	}
	_, _ = rt.Get(ctx, get)

	want := []OperationEvent{
		{Op: OpAcquire, Status: StatusAcquired},
		{Op: OpRenew, Status: StatusRenewed},
		{Op: OpRelease, Status: StatusReleased},
		{Op: OpGet, Status: StatusFound},
		{Op: OpList, Status: StatusFound},
		{Op: OpRevoke, Status: StatusRevoked},
		{Op: OpRenew, Status: StatusRenewed, Replayed: true},
		{Op: OpRelease, Status: StatusUnavailable},
		{Op: OpAcquire, Status: StatusInvalid},
		{Op: OpHealth, Status: ""},
		{Op: OpHealth, Status: StatusUnavailable},
		{Op: OpClose, Status: ""},
		{Op: OpGet, Status: StatusClosed},
	}
	got := obs.all()
	if len(got) != len(want) {
		t.Fatalf("observer saw %d events, want %d (one per operation): %+v", len(got), len(want), got)
	}
	for i, w := range want {
		g := got[i]
		if g.Op != w.Op || g.Status != w.Status || g.Replayed != w.Replayed || g.Backend != "fake" || g.Duration < 0 {
			t.Errorf("event %d = %+v, want op %s status %q replayed %v backend fake", i, g, w.Op, w.Status, w.Replayed)
		}
	}
}

func TestRuntimeAuditHook(t *testing.T) {
	var answer func(op Op, req any) (Result, error)
	b := &fakeBackend{handle: func(_ context.Context, op Op, req any) (Result, error) { return answer(op, req) }}
	hook := &changeLog{}
	rt := New(b, &Config{AuditHook: hook})
	defer rt.Close(context.Background())
	ctx := context.Background()
	acq, ren, rel, get, list, rev := validRequests()

	// Successful state changes: one call each, with the actor and reason.
	answer = func(op Op, req any) (Result, error) { return defaultAnswer(op, req), nil }
	runAll(ctx, rt, acq, ren, rel, get, list, rev)
	got := hook.all()
	want := []StateChange{
		{Op: OpAcquire, Status: StatusAcquired, Lease: *fakeLease(acq.Key, "w1", 1), RequestID: "acq-1", Actor: "w1"},
		{Op: OpRenew, Status: StatusRenewed, Lease: *fakeLease(acq.Key, "w1", 1), RequestID: "ren-1", Actor: "w1"},
		{Op: OpRelease, Status: StatusReleased, Lease: *fakeLease(acq.Key, "w1", 1), RequestID: "rel-1", Actor: "w1"},
		{Op: OpRevoke, Status: StatusRevoked, Lease: *fakeLease(acq.Key, "holder", 1), RequestID: "rev-1", Actor: "ops", Reason: "stuck"},
	}
	if len(got) != len(want) {
		t.Fatalf("audit hook called %d times, want %d: %+v", len(got), len(want), got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("change %d = %+v\nwant %+v", i, got[i], want[i])
		}
	}

	// Never for replays, failures, errors, invalid requests or closed.
	answer = func(op Op, req any) (Result, error) {
		res := defaultAnswer(op, req)
		res.Replayed = true
		return res, nil
	}
	runAll(ctx, rt, acq, ren, rel, get, list, rev)
	for _, st := range []Status{StatusConflict, StatusStaleToken, StatusNotOwner, StatusExpired, StatusNotFound, StatusInvalid} {
		answer = func(Op, any) (Result, error) { return Result{Status: st, Lease: fakeLease(acq.Key, "x", 9)}, nil }
		runAll(ctx, rt, acq, ren, rel, get, list, rev)
	}
	answer = func(Op, any) (Result, error) { return Result{}, errors.New("driver: down") }
	runAll(ctx, rt, acq, ren, rel, get, list, rev)
	bad := acq
	bad.TTL = -1
	_, _ = rt.Acquire(ctx, bad)
	if n := len(hook.all()); n != len(want) {
		t.Fatalf("audit hook called %d more times for replays, failures and invalid requests", n-len(want))
	}
}

func TestRuntimeCloseRefusesNewOperations(t *testing.T) {
	b := &fakeBackend{}
	rt := New(b, nil)
	if err := rt.Close(context.Background()); err != nil {
		t.Fatalf("Close: %v", err)
	}
	acq, ren, rel, get, list, rev := validRequests()
	for _, o := range runAll(context.Background(), rt, acq, ren, rel, get, list, rev) {
		if o.status != StatusClosed || !errors.Is(o.err, ErrClosed) {
			t.Errorf("%s after Close = %q, %v; want closed", o.op, o.status, o.err)
		}
		checkErrMatchesStatus(t, string(o.op), o.status, o.err)
	}
	if err := rt.Health(context.Background()); !errors.Is(err, ErrClosed) {
		t.Errorf("Health after Close = %v, want closed", err)
	}
	if n := len(b.callList()); n != 0 {
		t.Errorf("the backend received %d operations after Close", n)
	}
	if n := b.closeCount(); n != 1 {
		t.Errorf("backend closed %d times, want 1", n)
	}
}

func TestRuntimeCloseWaitsForInFlight(t *testing.T) {
	bl := newBlocker(OpAcquire)
	b := &fakeBackend{handle: bl.handle}
	rt := New(b, nil)
	acq, _, _, get, _, _ := validRequests()

	type outcome struct {
		res Result
		err error
	}
	opDone := make(chan outcome, 1)
	go func() {
		res, err := rt.Acquire(context.Background(), acq)
		opDone <- outcome{res, err}
	}()
	bl.waitEntered(t)

	closeDone := make(chan error, 1)
	go func() { closeDone <- rt.Close(context.Background()) }()

	// Once Close has begun, new operations answer closed.
	deadline := time.After(10 * time.Second)
	for {
		res, _ := rt.Get(context.Background(), get)
		if res.Status == StatusClosed {
			break
		}
		select {
		case <-deadline:
			t.Fatal("operations never answered closed after Close began")
		case <-time.After(time.Millisecond):
		}
	}
	select {
	case err := <-closeDone:
		t.Fatalf("Close returned (%v) while an operation was in flight", err)
	default:
	}
	if n := b.closeCount(); n != 0 {
		t.Fatalf("backend closed while an operation was in flight")
	}

	close(bl.release)
	o := <-opDone
	if o.err != nil || o.res.Status != StatusAcquired || o.res.Lease == nil {
		t.Errorf("in-flight acquire = %+v, %v; want its own result, acquired", o.res, o.err)
	}
	if err := <-closeDone; err != nil {
		t.Errorf("Close = %v, want nil", err)
	}
	if n := b.closeCount(); n != 1 {
		t.Errorf("backend closed %d times, want 1", n)
	}
}

func TestRuntimeCloseTwiceAndConcurrently(t *testing.T) {
	closeErr := errors.New("fake: close failed")
	for _, wantErr := range []error{nil, closeErr} {
		b := &fakeBackend{closeErr: wantErr}
		rt := New(b, nil)
		const n = 8
		errs := make(chan error, n)
		var start sync.WaitGroup
		start.Add(1)
		for range n {
			go func() {
				start.Wait()
				errs <- rt.Close(context.Background())
			}()
		}
		start.Done()
		for range n {
			if err := <-errs; !errors.Is(err, wantErr) || (wantErr == nil) != (err == nil) {
				t.Errorf("concurrent Close = %v, want %v", err, wantErr)
			}
		}
		if err := rt.Close(context.Background()); (wantErr == nil) != (err == nil) || !errors.Is(err, wantErr) {
			t.Errorf("Close again = %v, want %v", err, wantErr)
		}
		if got := b.closeCount(); got != 1 {
			t.Errorf("backend closed %d times, want exactly 1", got)
		}
	}
}

func TestRuntimeCloseDeadlineWithStuckOperation(t *testing.T) {
	bl := newBlocker(OpRenew)
	b := &fakeBackend{handle: bl.handle}
	obs := &eventLog{}
	rt := New(b, &Config{Observer: obs})
	_, ren, _, _, _, _ := validRequests()

	opDone := make(chan Result, 1)
	go func() {
		res, _ := rt.Renew(context.Background(), ren)
		opDone <- res
	}()
	bl.waitEntered(t)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	err := rt.Close(ctx)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Close with a stuck operation = %v, want an error wrapping context.DeadlineExceeded", err)
	}
	if !strings.HasPrefix(err.Error(), "lease: close: ") {
		t.Errorf("Close error %q lacks its noun prefix", err)
	}
	if n := b.closeCount(); n != 1 {
		t.Fatalf("backend closed %d times after the close deadline, want 1", n)
	}
	b.mu.Lock()
	closeCtxErr, bounded := b.closeCtxErr, b.closeCtxBounded
	b.mu.Unlock()
	if closeCtxErr != nil {
		t.Fatalf("backend Close got a context that was already done (%v): it had no chance to close cleanly", closeCtxErr)
	}
	if !bounded {
		t.Fatalf("backend Close got an unbounded context after the caller's deadline passed")
	}
	// A later Close reports the same outcome without closing the backend again.
	if err2 := rt.Close(context.Background()); err2 == nil || err2.Error() != err.Error() {
		t.Errorf("second Close = %v, want the first call's error %v", err2, err)
	}

	// The stuck operation still ends and gets its own result.
	close(bl.release)
	if res := <-opDone; res.Status != StatusRenewed {
		t.Errorf("stuck renew finished with %q, want renewed", res.Status)
	}
	if n := b.closeCount(); n != 1 {
		t.Errorf("backend closed %d times, want 1", n)
	}
	var closeEv *OperationEvent
	for _, ev := range obs.all() {
		if ev.Op == OpClose {
			closeEv = &ev
		}
	}
	if closeEv == nil || closeEv.Status != StatusTimeout {
		t.Errorf("close event = %+v, want status timeout", closeEv)
	}
}

func TestRuntimeSecondCloseHonoursItsOwnContext(t *testing.T) {
	bl := newBlocker(OpRenew)
	b := &fakeBackend{handle: bl.handle}
	rt := New(b, nil)
	_, ren, _, _, _, _ := validRequests()
	go func() { _, _ = rt.Renew(context.Background(), ren) }()
	bl.waitEntered(t)

	firstDone := make(chan error, 1)
	go func() { firstDone <- rt.Close(context.Background()) }()
	// Wait until the first Close has begun: new operations answer closed.
	for {
		if _, err := rt.Get(context.Background(), GetRequest{Key: ren.Key}); errors.Is(err, ErrClosed) {
			break
		}
		time.Sleep(time.Millisecond)
	}
	// The first Close waits for the stuck renew; a second Close with a short
	// deadline must give up at its deadline instead of waiting with it.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := rt.Close(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("second Close = %v, want its own deadline", err)
	}
	close(bl.release)
	if err := <-firstDone; err != nil {
		t.Fatalf("first Close = %v", err)
	}
	if n := b.closeCount(); n != 1 {
		t.Fatalf("backend closed %d times, want 1", n)
	}
}

// NewRequestID makes 32 hex digits that sort in the order they were made.
func TestNewRequestIDIsTimeOrdered(t *testing.T) {
	prev := ""
	for range 1000 {
		id := NewRequestID()
		if len(id) != 32 || strings.Trim(id, "0123456789abcdef") != "" {
			t.Fatalf("request id %q: want 32 hex digits", id)
		}
		if id <= prev {
			t.Fatalf("request id %q after %q: not increasing", id, prev)
		}
		prev = id
	}
}

// Every error the runtime returns says its key and its cause once: the
// message never repeats them (the rule on [Error]).
func TestRuntimeErrorsSayKeyAndCauseOnce(t *testing.T) {
	key := Key{Namespace: "ns", Name: "job-77"}
	cause := errors.New("dial tcp 127.0.0.1:5432: connection refused")
	holder := fakeLease(key, "worker-3", 41)
	cases := []struct {
		name   string
		handle func(ctx context.Context, op Op, req any) (Result, error)
		ctx    func() (context.Context, context.CancelFunc)
		req    AcquireRequest
		cause  string // "" when the error has none
	}{
		{name: "conflict", handle: func(context.Context, Op, any) (Result, error) {
			return Result{Status: StatusConflict, Lease: holder}, nil
		}},
		{name: "backend error", handle: func(context.Context, Op, any) (Result, error) {
			return Result{}, &Error{Status: StatusUnavailable, Message: "postgres: cannot connect", Err: cause}
		}, cause: cause.Error()},
		{name: "plain error", handle: func(context.Context, Op, any) (Result, error) {
			return Result{}, cause
		}, cause: cause.Error()},
		{name: "deadline", handle: func(ctx context.Context, _ Op, _ any) (Result, error) {
			<-ctx.Done()
			return Result{}, &Error{Status: StatusTimeout, Message: "postgres: the deadline passed", Err: ctx.Err()}
		}, ctx: func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), 10*time.Millisecond)
		}, cause: context.DeadlineExceeded.Error()},
		{name: "invalid", req: AcquireRequest{Key: key, TTL: time.Minute}, cause: "owner: must not be empty"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rt := New(&fakeBackend{handle: tc.handle}, nil)
			defer rt.Close(context.Background())
			ctx, cancel := context.Background(), context.CancelFunc(func() {})
			if tc.ctx != nil {
				ctx, cancel = tc.ctx()
			}
			defer cancel()
			req := tc.req
			if req.Key == (Key{}) {
				req = AcquireRequest{Key: key, Owner: "w1", TTL: time.Minute}
			}
			res, err := rt.Acquire(ctx, req)
			if err == nil {
				t.Fatalf("Acquire = %+v, nil; want an error", res)
			}
			text := err.Error()
			if n := strings.Count(text, key.String()); n != 1 {
				t.Errorf("%q names the key %d times, want once", text, n)
			}
			if tc.cause != "" {
				if n := strings.Count(text, tc.cause); n != 1 {
					t.Errorf("%q holds the cause %q %d times, want once", text, tc.cause, n)
				}
				if n := strings.Count(res.Message, tc.cause); n != 1 {
					t.Errorf("result message %q holds the cause %d times, want once", res.Message, n)
				}
			}
			if strings.Contains(res.Message, key.String()) {
				t.Errorf("result message %q repeats the key", res.Message)
			}
		})
	}
}

// A zero lock-delay takes the first matching namespace default; a
// request's own wins. The backend gets the default apart from the
// request's lock-delay (DefaultLockDelay), which stays what was asked.
func TestRuntimeLockDelayDefaults(t *testing.T) {
	b := &fakeBackend{}
	rt := New(b, &Config{LockDelays: []NamespaceLockDelay{{Namespaces: "jobs-*", Delay: 15 * time.Second}, {Namespaces: "*", Delay: time.Second}}})
	defer rt.Close(context.Background())
	for _, c := range []struct {
		ns        string
		own, want time.Duration
	}{{"jobs-a", 0, 15 * time.Second}, {"other", 0, time.Second}, {"jobs-a", 2 * time.Second, 2 * time.Second}} {
		_, _ = rt.Acquire(context.Background(), AcquireRequest{Key: Key{Namespace: c.ns, Name: "k"}, Owner: "o", TTL: time.Minute, LockDelay: c.own})
		calls := b.callList()
		got := calls[len(calls)-1].req.(AcquireRequest)
		if got.StoredLockDelay() != c.want || got.LockDelay != c.own {
			t.Errorf("%s with lock-delay %v: the backend got lock-delay %v (default %v), want %v asked, %v in all",
				c.ns, c.own, got.LockDelay, got.DefaultLockDelay, c.own, c.want)
		}
	}
	if err := (NamespaceLockDelay{Namespaces: "[", Delay: time.Second}).Validate(); err == nil {
		t.Error("a malformed glob validated")
	}
}
