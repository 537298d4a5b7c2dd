//go:build unix

package main

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// A watch of one key on a store that streams its trail (etcd: an etcd
// watch) asked, in its expiry check, the trail for a change of the key
// after the last record it printed, as etcd's stream told no position
// then; once a prune removed later records of other keys, that read failed
// "behind a prune" at every try: the lease's expiry was never reported, and
// the watch ran on (exit 0) as if the lease were held. The key's newest
// record told instead (the stream delivered every record of the key as it
// committed); etcd's stream now tells its position, which serves first. TestWatchKeyReportsExpiryAfterAPruneOfOtherKeys (package
// cli) is the same on a store the watch reads page by page.
func TestWatchKeyOnAStreamReportsExpiryAfterAPruneOfOtherKeys(t *testing.T) {
	t.Parallel()
	c := leasectl{dir: t.TempDir(), dsn: etcdDSN(t)}
	w := c.start(t, "watch", "mine", "-o", "json")
	w.expect(w.errs, "following")
	const ttl = 4 * time.Second
	taken := time.Now()
	c.runJSON(t, 0, "acquire", "mine", "--owner", "w", "--ttl", ttl.String())
	w.expect(w.out, `"op":"acquire"`)
	c.runJSON(t, 0, "acquire", "other", "--owner", "w", "--ttl", "1h")
	pruneThenExpectExpiry(t, w, c, taken, ttl)
}

// The same on a served store (an http DSN): its follow stream tells how far
// it has read in position events, which the watch uses as it does a
// paging reader's (expiryWatch.passed); a server older than them leaves
// it the etcd way above. The acquires go through the server, the prune
// straight to the SQLite file, as the HTTP API has no prune route.
func TestWatchKeyOnAServedStoreReportsExpiryAfterAPruneOfOtherKeys(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := leasectl{dir: dir, dsn: "sqlite:" + filepath.Join(dir, "served.db")}
	s := startServe(t, dir, file.dsn, nil)
	c := leasectl{dir: dir, dsn: s.url}
	w := c.start(t, "watch", "mine", "-o", "json", "--log-level", "debug")
	w.expect(w.errs, "following")
	const ttl = 8 * time.Second
	taken := time.Now()
	c.runJSON(t, 0, "acquire", "mine", "--owner", "w", "--ttl", ttl.String())
	w.expect(w.out, `"op":"acquire"`)
	c.runJSON(t, 0, "acquire", "other", "--owner", "w", "--ttl", "1h")
	// The server's stream has read past other's record (id 2), and told
	// the watch so, before the prune: a prune of a record the stream had
	// not read yet ends it behind the prune, as it must.
	w.expect(w.errs, "cursor=a1.2")
	pruneThenExpectExpiry(t, w, file, taken, ttl)
}

// pruneThenExpectExpiry prunes every record so far through pruner, then
// expects watch w to report the expiry of the lease taken at taken for ttl
// and to end with exit 0 at Ctrl-C. It fails the test when the set-up
// outlived the lease: its expiry could then be judged before the prune.
func pruneThenExpectExpiry(t *testing.T, w *proc, pruner leasectl, taken time.Time, ttl time.Duration) {
	t.Helper()
	pruner.runJSON(t, 0, "audit", "prune", "--before", time.Now().UTC().Format(time.RFC3339Nano), "--yes")
	if time.Since(taken) >= ttl {
		t.Fatalf("the set-up took %v, past the lease's %v TTL: its expiry could be judged before the prune; raise the TTL",
			time.Since(taken), ttl)
	}
	w.expect(w.out, `"op":"expire"`)
	if err := w.signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	if code := w.wait(); code != 0 {
		t.Fatalf("watch after Ctrl-C: exit %d, want 0\n%s", code, w.output())
	}
}
