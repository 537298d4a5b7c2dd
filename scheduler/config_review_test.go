package scheduler_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/leasestore/leasestore/memstore"
	"github.com/leasestore/leasestore/scheduler"
)

// A RenewEvery longer than the TTL, OpTimeout left to its default (which
// takes RenewEvery's value): one bad duration, one error naming RenewEvery.
// OpTimeout, which the user never set, must not be refused for the value
// it took from RenewEvery ("op timeout: 20s is not shorter than the ttl
// ... set it shorter" tells them to change a field they did not write).
func TestNewDoesNotBlameTheDefaultOpTimeoutForALongRenewEvery(t *testing.T) {
	t.Parallel()
	cfg := &scheduler.Config{TTL: 10 * time.Second, RenewEvery: 20 * time.Second}
	_, err := scheduler.New(memstore.New(nil), "w1", scheduler.Static("t"), func(context.Context, string, int64) {}, cfg)
	if err == nil {
		t.Fatal("New accepted RenewEvery 20s with a TTL of 10s")
	}
	if lines := strings.Split(err.Error(), "\n"); len(lines) != 1 || strings.Contains(err.Error(), "op timeout:") {
		t.Errorf("New with TTL 10s, RenewEvery 20s, OpTimeout unset: %q; want one error, naming renew every only", err)
	}
}
