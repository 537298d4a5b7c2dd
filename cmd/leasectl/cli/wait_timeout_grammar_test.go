package cli

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/leasestore/leasestore/protocol"
)

// run's messages after --wait-timeout quote it as the user wrote it, in
// the one duration grammar (DESIGN.md contract v3): "--wait-timeout 1m",
// not Go's "--wait-timeout 1m0s"; both when the wait ran out asleep
// (stoppedBeforeCommand) and while an attempt was in flight
// (stoppedWaiting).
func TestRunWaitTimeoutIsQuotedInTheOneGrammar(t *testing.T) {
	t.Parallel()
	k := protocol.Key{Namespace: "default", Name: "job"}
	req := protocol.AcquireRequest{Key: k, Owner: "w2", TTL: time.Minute}
	w := waitFlags{wait: true, timeout: time.Minute}
	wctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	msgs := map[string]string{"asleep": stoppedBeforeCommand(context.Background(), wctx, req, w).Error()}
	met := &protocol.Error{Op: protocol.OpAcquire, Status: protocol.StatusConflict, Key: k,
		Lease: &protocol.Lease{Key: k, Owner: "w1", Token: 1, ExpiresAt: time.Now().Add(time.Hour)}}
	msgs["in flight"] = stoppedWaiting(req, w, met).Message
	for when, msg := range msgs {
		if strings.Contains(msg, "1m0s") || !strings.Contains(msg, "--wait-timeout 1m") {
			t.Errorf("%s: %q: want --wait-timeout 1m, not Go's 1m0s", when, msg)
		}
	}
}
