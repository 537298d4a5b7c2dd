package sqlite_test

import (
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/leasestore/leasestore/protocol"
	"github.com/leasestore/leasestore/sqlstore/sqlite"
)

// TestURIPragmaCannotTurnTheBusyTimeoutOff: OpenDB says a "file:" URI's
// _pragma of a pinned pragma is dropped, but a busy_timeout written as SQLite
// also reads it (a quoted or bracketed name, a schema with spaces, a tab, a
// second statement) passes the filter and runs after the busy timeout OpenDB
// set, so a write meeting another connection's lock for a moment fails at
// once instead of waiting. Open may instead refuse a spelling, naming
// _pragma and the form it must take.
func TestURIPragmaCannotTurnTheBusyTimeoutOff(t *testing.T) {
	for i, p := range []string{`"busy_timeout"(0)`, `[busy_timeout](0)`, "busy_timeout\t(0)", "main . busy_timeout = 0", "cache_size(-4000); PRAGMA busy_timeout = 0"} {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			path := migratedFile(t)
			b, err := sqlite.Open(ctxT(t), "file:"+path+"?_pragma="+url.QueryEscape(p), nil)
			if err != nil {
				// A refusal is a fix when it names the parameter and the
				// form it must take.
				if !strings.Contains(err.Error(), "_pragma") || !strings.Contains(err.Error(), "NAME(VALUE)") {
					t.Fatalf("Open with _pragma=%s: %v; want it to serve with the busy timeout, or a refusal naming _pragma and its form NAME(VALUE)", p, err)
				}
				return
			}
			t.Cleanup(func() { _ = b.Close(ctxT(t)) })
			rt := protocol.New(b, nil)
			release := holdWriteLock(t, path)
			done := make(chan struct{})
			go func() {
				defer close(done)
				time.Sleep(200 * time.Millisecond)
				release()
			}()
			defer func() { <-done }()
			res, err := rt.Acquire(ctxT(t), protocol.AcquireRequest{Key: key("k"), Owner: "a", TTL: time.Minute})
			if err != nil || res.Status != protocol.StatusAcquired {
				t.Fatalf("_pragma=%s: acquire while another connection held the write lock for 200ms: %q (%s), %v; "+
					"want acquired after waiting (busy_timeout %v)", p, res.Status, res.Message, err, sqlite.DefaultBusyTimeout)
			}
		})
	}
}
