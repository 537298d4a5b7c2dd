package sqlite_test

// BenchmarkWALFrames counts the pages a single write commits: each dirty
// page of a transaction is one frame of the write-ahead log, written and
// then synced with the commit (synchronous=FULL), so the count is the
// part of a write's cost that the schema and the statements decide. The
// figure is exact, not timed: a reader holds a snapshot of the log all
// along, so the log is never restarted and only grows; after each
// operation the frames it appended are read (their headers name the
// page) and mapped to the b-tree (table or index) each page belongs to
// through the dbstat virtual table.
//
// Each iteration acquires a fresh key and releases it, as bench/peers
// does at one caller with many keys: through the backend (protocol.Runtime
// over sqlite.Open), which renews the lease in between, and through the
// raw one-transaction loop of cmd/leasectl/rawbench (which has no renew). With -v the pages per operation are listed by
// b-tree.
//
//	go test -run '^$' -bench WALFrames -v ./sqlstore/sqlite/

import (
	"context"
	"encoding/binary"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leasestore/leasestore/cmd/leasectl/rawbench"
	"github.com/leasestore/leasestore/protocol"
	"github.com/leasestore/leasestore/sqlstore/sqlite"
)

// walSize is the WAL header's size; each frame has a header of walFrameHeader.
const (
	walSize        = 32
	walFrameHeader = 24
)

// walCounter counts the frames appended to path's log and the pages they hold.
type walCounter struct {
	b        testing.TB
	path     string
	pageSize int64
	f        *os.File
	off      int64            // end of the frames counted so far
	pages    map[string][]int // op -> page numbers of its frames, every run
	ops      map[string]int   // op -> operations counted
}

// pinWAL opens a reader on path that holds a snapshot of the log (which
// must hold a frame already) until the benchmark ends, so that no
// checkpoint restarts the log, and returns a counter from its current end.
func pinWAL(b testing.TB, path string) *walCounter {
	b.Helper()
	ctx := context.Background()
	db, err := sqlite.OpenDB(path)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = db.Close() })
	conn, err := db.Conn(ctx)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _, _ = conn.ExecContext(ctx, "COMMIT"); _ = conn.Close() })
	var pageSize int64
	if err := conn.QueryRowContext(ctx, "PRAGMA page_size").Scan(&pageSize); err != nil {
		b.Fatal(err)
	}
	if _, err := conn.ExecContext(ctx, "BEGIN DEFERRED"); err != nil {
		b.Fatal(err)
	}
	var n int64
	if err := conn.QueryRowContext(ctx, "SELECT count(*) FROM sqlite_schema").Scan(&n); err != nil {
		b.Fatal(err)
	}
	f, err := os.Open(path + "-wal")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = f.Close() })
	w := &walCounter{b: b, path: path, pageSize: pageSize, f: f, pages: map[string][]int{}, ops: map[string]int{}}
	w.off = w.end()
	if w.off <= walSize {
		b.Fatal("the log holds no frame: the reader's snapshot would not keep it from restarting")
	}
	return w
}

// end returns the end of the last whole frame in the log.
func (w *walCounter) end() int64 {
	st, err := w.f.Stat()
	if err != nil {
		w.b.Fatal(err)
	}
	frame := w.pageSize + walFrameHeader
	return walSize + (st.Size()-walSize)/frame*frame
}

// count attributes the frames appended since the last call to op.
func (w *walCounter) count(op string) {
	end := w.end()
	if end < w.off {
		w.b.Fatalf("the log shrank from %d to %d bytes: it was restarted, the count is lost", w.off, end)
	}
	var hdr [4]byte
	for off := w.off; off < end; off += w.pageSize + walFrameHeader {
		if _, err := w.f.ReadAt(hdr[:], off); err != nil {
			w.b.Fatal(err)
		}
		w.pages[op] = append(w.pages[op], int(binary.BigEndian.Uint32(hdr[:])))
	}
	w.ops[op]++
	w.off = end
}

// byTree returns, per operation, the frames counted per operation of each
// b-tree (table or index) by name.
func (w *walCounter) byTree() map[string]map[string]float64 {
	owners := map[int]string{}
	db, err := sqlite.OpenDB(w.path)
	if err != nil {
		w.b.Fatal(err)
	}
	defer func() { _ = db.Close() }()
	rows, err := db.Query("SELECT name, pageno FROM dbstat")
	if err != nil {
		w.b.Fatal(err)
	}
	for rows.Next() {
		var name string
		var page int
		if err := rows.Scan(&name, &page); err != nil {
			w.b.Fatal(err)
		}
		owners[page] = name
	}
	if err := rows.Close(); err != nil {
		w.b.Fatal(err)
	}
	trees := map[string]map[string]float64{}
	for op, pages := range w.pages {
		by := map[string]float64{}
		for _, p := range pages {
			name, ok := owners[p]
			if !ok {
				name = "(freelist)"
			}
			by[name] += 1 / float64(w.ops[op])
		}
		trees[op] = by
	}
	return trees
}

// report reports frames per operation to b, and with -v lists them by
// b-tree.
func (w *walCounter) report(b *testing.B) {
	trees := w.byTree()
	for _, op := range slices.Sorted(maps.Keys(w.ops)) {
		n := float64(w.ops[op])
		b.ReportMetric(float64(len(w.pages[op]))/n, "frames/"+op)
		var parts []string
		for _, name := range slices.Sorted(maps.Keys(trees[op])) {
			parts = append(parts, fmt.Sprintf("%s %.2f", name, trees[op][name]))
		}
		b.Logf("%s: %.2f frames per op over %d ops: %s", op, float64(len(w.pages[op]))/n, w.ops[op], strings.Join(parts, ", "))
	}
}

func BenchmarkWALFrames(b *testing.B) {
	ctx := context.Background()
	const ttl = time.Hour
	b.Run("backend", func(b *testing.B) {
		path := migratedFile(b)
		be, err := sqlite.Open(ctx, path, nil)
		if err != nil {
			b.Fatal(err)
		}
		rt := protocol.New(be, nil)
		b.Cleanup(func() { _ = rt.Close(ctx) })
		if _, err := rt.Acquire(ctx, protocol.AcquireRequest{Key: protocol.Key{Namespace: "bench", Name: "first"}, Owner: "w", TTL: ttl}); err != nil {
			b.Fatal(err)
		}
		w := pinWAL(b, path)
		b.ResetTimer()
		for i := range b.N {
			k := protocol.Key{Namespace: "bench", Name: "key-" + strconv.Itoa(i)}
			res, err := rt.Acquire(ctx, protocol.AcquireRequest{Key: k, Owner: "w", TTL: ttl})
			if err != nil || res.Status != protocol.StatusAcquired {
				b.Fatalf("acquire %s: %v %v", k, res.Status, err)
			}
			w.count("acquire")
			token := res.Lease.Token
			res, err = rt.Renew(ctx, protocol.RenewRequest{Key: k, Owner: "w", Token: token, TTL: ttl})
			if err != nil || res.Status != protocol.StatusRenewed {
				b.Fatalf("renew %s: %v %v", k, res.Status, err)
			}
			w.count("renew")
			res, err = rt.Release(ctx, protocol.ReleaseRequest{Key: k, Owner: "w", Token: token})
			if err != nil || res.Status != protocol.StatusReleased {
				b.Fatalf("release %s: %v %v", k, res.Status, err)
			}
			w.count("release")
		}
		b.StopTimer()
		w.report(b)
	})
	b.Run("raw", func(b *testing.B) {
		r, err := rawbench.OpenSQLite(ctx, b.TempDir())
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = r.Close(ctx) })
		if _, _, err := r.Acquire(ctx, "first", "w", ttl); err != nil {
			b.Fatal(err)
		}
		w := pinWAL(b, r.Path())
		b.ResetTimer()
		for i := range b.N {
			name := "key-" + strconv.Itoa(i)
			token, ok, err := r.Acquire(ctx, name, "w", ttl)
			if err != nil || !ok {
				b.Fatalf("acquire %s: %v %v", name, ok, err)
			}
			w.count("acquire")
			if ok, err := r.Release(ctx, name, "w", token); err != nil || !ok {
				b.Fatalf("release %s: %v %v", name, ok, err)
			}
			w.count("release")
		}
		b.StopTimer()
		w.report(b)
	})
}
