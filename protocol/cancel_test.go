package protocol

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// A caller that cancels its context learns that it cancelled: the status
// stays timeout (the effect is unknown), and the error says "cancelled" and
// matches context.Canceled whatever the backend returned; a passed deadline
// is told apart.
func TestCancelledCallerIsNotReportedAsADeadline(t *testing.T) {
	t.Parallel()
	driverErr := errors.New("driver: connection closed")
	cases := []struct {
		name   string
		before bool  // cancelled before the call
		ret    error // what the backend returns after the cancellation
	}{
		{"before the call", true, nil},
		{"context error from the backend", false, context.Canceled},
		{"driver error from the backend", false, driverErr},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if tc.before {
				cancel()
			}
			rt := New(&fakeBackend{handle: func(ctx context.Context, _ Op, _ any) (Result, error) {
				cancel()
				<-ctx.Done()
				return Result{}, tc.ret
			}}, nil)
			defer rt.Close(context.Background())
			acq, _, _, _, _, _ := validRequests()
			res, err := rt.Acquire(ctx, acq)
			if res.Status != StatusTimeout || !errors.Is(err, ErrTimeout) {
				t.Fatalf("status %q, error %v; want timeout (the effect is unknown)", res.Status, err)
			}
			if !errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("error %q should match context.Canceled and not context.DeadlineExceeded", err)
			}
			if tc.ret == driverErr && !errors.Is(err, driverErr) {
				t.Errorf("error %q lost the driver's cause", err)
			}
			if !strings.Contains(res.Message, "cancelled") || strings.Contains(res.Message, "deadline") {
				t.Errorf("message %q should say the caller cancelled", res.Message)
			}
			if !strings.Contains(res.Message, "request id") {
				t.Errorf("message %q should say how to learn the outcome", res.Message)
			}
		})
	}
	t.Run("deadline", func(t *testing.T) {
		t.Parallel()
		rt := New(&fakeBackend{handle: func(ctx context.Context, _ Op, _ any) (Result, error) {
			<-ctx.Done()
			return Result{}, driverErr
		}}, &Config{DefaultTimeout: 10 * time.Millisecond})
		defer rt.Close(context.Background())
		_, _, _, get, _, _ := validRequests()
		res, err := rt.Get(context.Background(), get)
		if res.Status != StatusTimeout || !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
			t.Fatalf("status %q, error %v; want timeout matching context.DeadlineExceeded", res.Status, err)
		}
		if !strings.Contains(res.Message, "deadline") {
			t.Errorf("message %q should say the deadline passed", res.Message)
		}
	})
}
