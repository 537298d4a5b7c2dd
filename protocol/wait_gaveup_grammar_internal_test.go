package protocol

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/leasestore/leasestore/durations"
)

// A wait that gave up says how long it waited in the one duration grammar
// (DESIGN.md contract v3: 90s, 15m, 1h30m, 2d), as a user writes the
// deadline they gave it: "after 1m", not Go's "after 1m0s". The time is
// the clock's, so it is a little over the wait's length: the text must
// read back (durations.Parse) as the wait's length to within a second,
// and be the grammar's own form of what it reads as (durations.Format).
// The waits of a day and more tell Go's form from the grammar's whatever
// the milliseconds ("1d2h0.004s", Go's "26h0m0.004s"); a minute and an
// hour only when the wait is a whole millisecond ("1m", Go's "1m0s").
func TestWaitGaveUpAfterIsWrittenInTheOneGrammar(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	k := Key{Namespace: "ns", Name: "k"}
	l := &Lease{Key: k, Owner: "w1", Token: 1, ExpiresAt: time.Now().Add(time.Hour)}
	for _, waited := range []time.Duration{time.Minute, 90 * time.Second, 2 * time.Hour, 26 * time.Hour, 48 * time.Hour} {
		res, _ := waitEnded(ctx, Result{Status: StatusConflict, Lease: l}, time.Now().Add(-waited))
		_, after, ok := strings.Cut(res.Message, "gave up waiting after ")
		text, _, _ := strings.Cut(after, " ")
		if !ok || text == "" {
			t.Errorf("a wait of %s that gave up says %q: want \"gave up waiting after %s\"", durations.Format(waited), res.Message,
				durations.Format(waited))
			continue
		}
		d, err := durations.Parse(text)
		if err != nil || d < waited || d > waited+time.Second || durations.Format(d) != text {
			t.Errorf("a wait of %s that gave up says %q: %q reads back as %s (%v), want about %s written as the grammar "+
				"writes it (%q), not in Go's form", durations.Format(waited), res.Message, text, durations.Format(d), err,
				durations.Format(waited), durations.Format(d))
		}
	}
}
