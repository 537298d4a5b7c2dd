package postgres_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/leasestore/leasestore/audit"
	"github.com/leasestore/leasestore/internal/testkit/pgtest"
	"github.com/leasestore/leasestore/protocol"
	"github.com/leasestore/leasestore/sqlstore/postgres"
)

// The tests in this file move a store the way operators do: pg_dump and
// pg_restore into a new cluster, and a hot standby made with pg_basebackup.
// Each makes throwaway clusters of its own (see cluster in chaos_test.go).

// burnTransactionIDs commits n transactions with an id each on dsn, so
// that the cluster's next ids lie well above a new cluster's.
func burnTransactionIDs(t *testing.T, dsn string, n int) {
	t.Helper()
	conn := rawConn(t, dsn)
	mustExec(t, conn, fmt.Sprintf(`DO $$ BEGIN
		FOR i IN 1..%d LOOP PERFORM pg_current_xact_id(); COMMIT; END LOOP;
	END $$`, n))
}

// cycle acquires name as owner and releases it unless keep, and returns the
// lease acquired.
func cycle(t *testing.T, b *postgres.Backend, name, owner, rid string, keep bool) protocol.Lease {
	t.Helper()
	res, err := b.Acquire(ctxT(t), protocol.AcquireRequest{Key: key(name), Owner: owner, TTL: time.Hour, RequestID: rid + "-a"})
	wantStatus(t, "acquire "+name, res, err, protocol.StatusAcquired)
	if !keep {
		rel, err := b.Release(ctxT(t), protocol.ReleaseRequest{Key: key(name), Owner: owner, Token: res.Lease.Token, RequestID: rid + "-r"})
		wantStatus(t, "release "+name, rel, err, protocol.StatusReleased)
	}
	return *res.Lease
}

// TestRestoreIntoANewCluster dumps a store with pg_dump, restores it with
// pg_restore into a new cluster (whose transaction ids start far lower),
// and keeps using it with no manual step: leases and tokens carry over,
// new audit records sort after every restored one, and a follower resuming
// after the last restored record sees them. A backend that was already
// open when the ids went back (a switchover under a running service, a
// restore over the schema it works in) gets there on its own too.
func TestRestoreIntoANewCluster(t *testing.T) {
	t.Parallel()
	src := newCluster(t)
	srcDSN := src.migratedSchema(t)
	burnTransactionIDs(t, srcDSN, 20000)
	b := openBackend(t, srcDSN, nil)
	last := map[string]int64{}
	for i := range 12 {
		name := fmt.Sprintf("k%d", i%4)
		l := cycle(t, b, name, "w", fmt.Sprintf("src-%d", i), i >= 8)
		last[name] = l.Token
	}
	restored := readAll(t, b, "ns")
	top := restored[len(restored)-1]

	dump := filepath.Join(src.dir, "store.dump")
	if out, err := exec.Command(filepath.Join(src.bin, "pg_dump"), "-h", "127.0.0.1", "-p", src.port, "-U", "leasestore",
		"-d", "postgres", "-n", "lincheck", "-Fc", "-f", dump).CombinedOutput(); err != nil {
		t.Fatalf("pg_dump: %v: %s", err, out)
	}
	dst := newCluster(t)
	// A backend already working in the target schema when it is dropped
	// and restored: its server connections checked the ids of the schema's
	// first era table (a session setting remembers it), and must check the
	// restored one's.
	early := openBackend(t, dst.migratedSchema(t), nil)
	cycle(t, early, "early", "e", "early-0", false)
	cycle(t, early, "early", "e", "early-1", false)
	mustExec(t, rawConn(t, dst.dsn()), "DROP SCHEMA lincheck CASCADE")
	if out, err := exec.Command(filepath.Join(dst.bin, "pg_restore"), "-h", "127.0.0.1", "-p", dst.port, "-U", "leasestore",
		"-d", "postgres", "--no-owner", "--no-privileges", dump).CombinedOutput(); err != nil {
		t.Fatalf("pg_restore: %v: %s", err, out)
	}
	dstDSN, err := pgtest.WithSearchPath(dst.dsn(), "lincheck")
	if err != nil {
		t.Fatal(err)
	}
	var next int64
	if err := rawConn(t, dstDSN).QueryRow(ctxT(t), "SELECT pg_snapshot_xmax(pg_current_snapshot())::text::bigint").Scan(&next); err != nil {
		t.Fatal(err)
	}
	if next >= top {
		t.Fatalf("the new cluster's next transaction id %d is not below the restored records' %d: the test proves nothing", next, top)
	}

	// The early backend writes first, before anything else started a new
	// era.
	cycle(t, early, "early", "e", "early-2", false)
	nb := openBackend(t, dstDSN, nil)
	// The leases came along: k0..k3 are held (the last four cycles kept them).
	res, err := nb.Acquire(ctxT(t), protocol.AcquireRequest{Key: key("k0"), Owner: "x", TTL: time.Hour, RequestID: "dst-held"})
	wantStatus(t, "acquire of a restored lease", res, err, protocol.StatusConflict)
	rev, err := nb.Revoke(ctxT(t), protocol.RevokeRequest{Key: key("k0"), Actor: "op", Reason: "moved", RequestID: "dst-rev"})
	wantStatus(t, "revoke", rev, err, protocol.StatusRevoked)
	l := cycle(t, nb, "k0", "x", "dst-0", false)
	if l.Token <= last["k0"] {
		t.Fatalf("token %d after the restore, want more than %d", l.Token, last["k0"])
	}
	cycle(t, nb, "fresh", "x", "dst-1", false)

	after := readAll(t, nb, "ns")
	if len(after) != len(restored)+7 {
		t.Fatalf("%d records after the restore, want %d restored and 7 new", len(after), len(restored))
	}
	for _, id := range after[len(restored):] {
		if id <= top {
			t.Fatalf("a new record has id %d, not after the last restored one, %d", id, top)
		}
	}
	got := followFrom(t, nb, audit.EncodeCursor(top), 7)
	if len(got) != 7 {
		t.Fatalf("a follower resuming after the last restored record saw %d new records, want 7", len(got))
	}

	// A backend already open when the ids went back: the write that meets
	// it starts a new era and succeeds.
	mustExec(t, rawConn(t, dstDSN), "UPDATE leasestore_audit_era SET id_offset = 0")
	before := readAll(t, nb, "ns")
	cycle(t, nb, "fresh", "x", "dst-2", false)
	all := readAll(t, nb, "ns")
	if len(all) != len(before)+2 || all[len(all)-2] <= before[len(before)-1] {
		t.Fatalf("records after the ids went back under an open backend: %v, want two after %d", all[len(before):], before[len(before)-1])
	}
}

// TestFollowerAfterARestoreFromABaseBackup brings a store back to an
// earlier point as a point-in-time recovery, a base backup put back or an
// asynchronous standby promoted do: the cluster is started from a
// pg_basebackup taken before more records were written, so its transaction
// ids, and with them the audit ids, go back to that point. A follower had
// read the records written after it (audit --follow, watch, a follow
// stream, an export resumed from its cursor). After fencing raise
// (docs/operator-guide.md "After a restore to an earlier point"), the new
// records must reach it: before, they took again the ids it had read past
// (the era check compares them only with the restored trail's newest), and
// it skipped them silently.
func TestFollowerAfterARestoreFromABaseBackup(t *testing.T) {
	t.Parallel()
	primary := newCluster(t)
	dsn := primary.migratedSchema(t)
	b := openBackend(t, dsn, nil)
	cycle(t, b, "k", "w", "before-0", false)
	restored := baseBackup(t, primary, "leasestore-pitr-")
	// The cluster runs on: other transactions, and more changes.
	burnTransactionIDs(t, dsn, 100)
	for i := range 3 {
		cycle(t, b, "k", "w", fmt.Sprintf("after-%d", i), false)
	}
	read := followFrom(t, b, "", 8) // a follower that read everything so far
	if len(read) != 8 {
		t.Fatalf("the follower read %d records before the restore, want 8", len(read))
	}
	cursor := audit.EncodeCursor(read[len(read)-1].ID)
	if err := b.Close(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	primary.run(t, "pg_ctl", "-D", primary.data, "-m", "fast", "-w", "stop")

	restored.start(t)
	rDSN, err := pgtest.WithSearchPath(restored.dsn(), "lincheck")
	if err != nil {
		t.Fatal(err)
	}
	r := openBackend(t, rDSN, nil)
	var next int64
	if err := rawConn(t, rDSN).QueryRow(ctxT(t),
		"SELECT pg_snapshot_xmax(pg_current_snapshot())::text::bigint + id_offset FROM leasestore_audit_era").Scan(&next); err != nil {
		t.Fatal(err)
	}
	if next > read[len(read)-1].ID {
		t.Fatalf("the restored cluster's next id %d is above the follower's cursor %s: the test proves nothing", next, cursor)
	}
	if _, err := r.RaiseTokens(ctxT(t), protocol.MinTokenRaise); err != nil {
		t.Fatal(err)
	}
	cycle(t, r, "new", "x", "restored", false) // an acquire and a release after the restore
	got := followFrom(t, r, cursor, 2)
	if len(got) != 2 {
		var ids []int64
		for _, rec := range readAllRecords(t, r, "ns") {
			if rec.Key == "new" {
				ids = append(ids, rec.ID)
			}
		}
		t.Fatalf("a follower at cursor %s read %d of the 2 records written after the restore and fencing raise "+
			"(their ids %v): it skipped them silently", cursor, len(got), ids)
	}
}

// followFrom reads as a follower from cursor until it has want records or
// ten seconds passed.
func followFrom(t *testing.T, r audit.Reader, cursor string, want int) []audit.Record {
	t.Helper()
	var got []audit.Record
	for deadline := time.Now().Add(10 * time.Second); len(got) < want && time.Now().Before(deadline); {
		p, err := r.ReadAudit(ctxT(t), audit.Query{Namespace: "ns", Follow: true, Cursor: cursor})
		if err != nil {
			t.Fatal(err)
		}
		for _, rec := range p.Records {
			got = append(got, rec)
			cursor = audit.EncodeCursor(rec.ID)
		}
		if len(p.Records) == 0 {
			time.Sleep(20 * time.Millisecond)
		}
	}
	return got
}

// newStandby makes a hot standby of primary with pg_basebackup and starts
// it on a port of its own; it is stopped and removed when the test ends.
func newStandby(t *testing.T, primary *cluster) *cluster {
	t.Helper()
	s := baseBackup(t, primary, "leasestore-standby-", "-R")
	s.opts += " -c hot_standby=on"
	s.start(t)
	return s
}

// baseBackup copies primary with pg_basebackup (the WAL it needs streamed
// along, and extra, such as -R, passed on) into a data directory of its
// own, for a server on a port of its own that it does not start; the
// server is stopped (if started) and the directory removed when the test
// ends.
func baseBackup(t *testing.T, primary *cluster, prefix string, extra ...string) *cluster {
	t.Helper()
	s := &cluster{bin: primary.bin, asUser: primary.asUser}
	var err error
	if s.dir, err = os.MkdirTemp("", prefix); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(s.dir) })
	if s.asUser != nil {
		if out, err := exec.Command("chown", "postgres:", s.dir).CombinedOutput(); err != nil {
			t.Fatalf("chown: %v: %s", err, out)
		}
	}
	s.data = filepath.Join(s.dir, "data")
	s.port = freePort(t)
	s.opts = fmt.Sprintf("-p %s -k %s -c listen_addresses=127.0.0.1", s.port, s.dir)
	s.run(t, "pg_basebackup", append([]string{"-h", "127.0.0.1", "-p", primary.port, "-U", "leasestore", "-D", s.data,
		"-X", "stream"}, extra...)...)
	t.Cleanup(func() {
		if _, err := os.Stat(filepath.Join(s.data, "postmaster.pid")); err != nil {
			return // never started, or stopped
		}
		if out, err := s.command("pg_ctl", "-D", s.data, "-m", "immediate", "-w", "stop").CombinedOutput(); err != nil {
			t.Logf("stopping the server of the base backup: %v: %s", err, out)
		}
	})
	return s
}

// TestFollowerOnAHotStandby follows the trail on a hot standby while
// writers commit on the primary: the follower must see every record, in
// order. The standby knows the primary's transactions in progress from the
// WAL, so its snapshots hold back what may still commit.
func TestFollowerOnAHotStandby(t *testing.T) {
	t.Parallel()
	primary := newCluster(t)
	pDSN := primary.migratedSchema(t)
	standby := newStandby(t, primary)
	sDSN, err := pgtest.WithSearchPath(standby.dsn(), "lincheck")
	if err != nil {
		t.Fatal(err)
	}
	writers := []*postgres.Backend{openBackend(t, pDSN, &postgres.Config{MaxConns: 4}),
		openBackend(t, pDSN, &postgres.Config{MaxConns: 4})}
	follower := openBackend(t, sDSN, nil)

	stop := make(chan struct{})
	var followed []int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		followed = follow(t, follower, "", stop)
	}()
	written := writeCycles(t, writers, 8, 20000, "ns")
	waitForReplay(t, pDSN, sDSN)
	close(stop)
	<-done
	all := readAll(t, writers[0], "")
	if int64(len(all)) != written {
		t.Fatalf("the primary's trail holds %d records, the writers reported %d", len(all), written)
	}
	if lost := missing(all, followed); len(lost) > 0 {
		t.Fatalf("the follower on the standby missed %d of %d records, first %v", len(lost), len(all), lost[:min(len(lost), 10)])
	}
	t.Logf("the follower on the standby saw all %d records", len(all))
}

// waitForReplay waits until the standby has replayed the primary's WAL as
// of now.
func waitForReplay(t *testing.T, primaryDSN, standbyDSN string) {
	t.Helper()
	var lsn string
	if err := rawConn(t, primaryDSN).QueryRow(ctxT(t), "SELECT pg_current_wal_lsn()::text").Scan(&lsn); err != nil {
		t.Fatal(err)
	}
	conn := rawConn(t, standbyDSN)
	for deadline := time.Now().Add(time.Minute); ; {
		var caught bool
		if err := conn.QueryRow(ctxT(t), "SELECT pg_last_wal_replay_lsn() >= $1::pg_lsn", lsn).Scan(&caught); err != nil {
			t.Fatal(err)
		}
		if caught {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the standby did not replay up to %s in a minute", lsn)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
