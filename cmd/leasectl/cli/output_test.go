package cli

import (
	"strings"
	"testing"
	"time"

	"github.com/leasestore/leasestore/protocol"
)

// An acquire's conflict is shown as an ended lease, whose lock-delay keeps
// the key, exactly when the store said so (by its message), whatever this
// machine's clock says: the store's clock judges expiry (DESIGN.md).
func TestConflictShownByTheStoresVerdict(t *testing.T) {
	at := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	l := &protocol.Lease{Key: protocol.Key{Namespace: "default", Name: "k"}, Owner: "w1", Token: 7,
		AcquiredAt: at.Add(-time.Minute), RenewedAt: at.Add(-time.Minute), ExpiresAt: at, LockDelay: time.Hour}
	delayed := protocol.Result{Op: protocol.OpAcquire, Status: protocol.StatusConflict, Lease: l,
		Message: protocol.LockDelayPrefix + "the lease of w1 (token 7) ended at ...; the key is free at ..."}
	live := protocol.Result{Op: protocol.OpAcquire, Status: protocol.StatusConflict, Lease: l}
	for _, c := range []struct {
		what  string
		res   protocol.Result
		now   time.Time // this machine's clock
		want  string
		wrong string
	}{
		{"ended by the store's clock, 2s before by this one", delayed, at.Add(-2 * time.Second),
			"(acquires answer conflict until ", "(acquires wait until "},
		{"live by the store's clock, 2s after by this one", live, at.Add(2 * time.Second),
			"(acquires wait until ", "(ended "},
	} {
		out := formatResult(c.res, c.res.Message, c.now, time.Time{})
		if !strings.Contains(out, c.want) || strings.Contains(out, c.wrong) {
			t.Errorf("%s: want %q and no %q in\n%s", c.what, c.want, c.wrong, out)
		}
	}
}
