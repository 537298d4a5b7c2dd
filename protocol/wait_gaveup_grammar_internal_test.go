package protocol

import (
	"context"
	"strings"
	"testing"
	"time"
)

// A wait that gave up says how long it waited in the one duration grammar
// (DESIGN.md contract v3: 90s, 15m, 1h30m, 2d), as a user writes the
// deadline they gave it: "after 1m", not Go's "after 1m0s".
func TestWaitGaveUpAfterIsWrittenInTheOneGrammar(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	k := Key{Namespace: "ns", Name: "k"}
	l := &Lease{Key: k, Owner: "w1", Token: 1, ExpiresAt: time.Now().Add(time.Hour)}
	res, _ := waitEnded(ctx, Result{Status: StatusConflict, Lease: l}, time.Now().Add(-time.Minute))
	if strings.Contains(res.Message, "m0s") || !strings.Contains(res.Message, "gave up waiting after 1m") {
		t.Errorf("a wait of a minute that gave up says %q: want \"gave up waiting after 1m\", not Go's 1m0s", res.Message)
	}
}
