package cli

import (
	"encoding/json"
	"testing"
	"time"
)

// docs/holding.md and DESIGN.md: watch's expire event carries "id the id
// of the acquire or renew that set that expiry", so that it can be
// resumed from (--cursor a1.ID). A watch from now (the default) of a
// lease live when it starts printed the event with id 0: the lease was
// seeded from a get, which knows no record, and a1.0 resumes from the
// start of the trail.
func TestWatchExpireEventCarriesTheIDOfItsRecord(t *testing.T) {
	t.Parallel()
	e := sqliteEnv(t)
	// The watch must start while the lease is live: 4s leaves room for the
	// audit read before it on a loaded machine (1s did not, in a -race run
	// beside other suites: the watch began after the expiry and saw none).
	wantCode(t, runCLI(t, e, "acquire", "k", "-n", "w", "--owner", "o", "--ttl", "4s"), 0)
	a := runCLI(t, e, "audit", "-n", "w", "--key", "k", "-o", "json")
	wantCode(t, a, 0)
	recs := a.json(t)["records"].([]any)
	if len(recs) != 1 {
		t.Fatalf("audit of w/k: %v", recs)
	}
	id := recs[0].(map[string]any)["id"]

	w := startWatch(e, "k", "-n", "w", "-o", "json", "--interval", "20ms")
	if !w.waitFor(t, false, `"op":"expire"`, 15*time.Second) {
		t.Fatalf("watch printed no expire event of a 4s lease:\n%s\n%s", w.stop(t), w.errs.String())
	}
	expires := expireEvents(t, w.stop(t))
	var ev map[string]any
	if len(expires) != 1 || json.Unmarshal([]byte(expires[0]), &ev) != nil {
		t.Fatalf("watch printed expire events %v, want one", expires)
	}
	if ev["id"] != id {
		t.Errorf("watch's expire event has id %v, want %v, the id of the acquire that set the expiry:\n%s", ev["id"], id, expires[0])
	}
}
