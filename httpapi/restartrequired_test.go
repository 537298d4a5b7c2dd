package httpapi_test

import (
	"context"
	"errors"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/leasestore/leasestore/audit"
	"github.com/leasestore/leasestore/httpapi"
	"github.com/leasestore/leasestore/internal/testkit/putback"
	"github.com/leasestore/leasestore/migrations"
	"github.com/leasestore/leasestore/protocol"
	"github.com/leasestore/leasestore/sqlstore/sqlite"
)

// servedPutBack serves a SQLite store on a loopback port and puts a copy
// of its file, taken before the store served anything, back under it: the
// served store then refuses every operation until its process restarts
// (an error matching protocol.ErrRestartRequired). It returns the base URL
// and the audit cursor at the end of the trail before the put-back.
func servedPutBack(t *testing.T) (string, string) {
	t.Helper()
	if runtime.GOOS == "windows" {
		t.Skip("Windows refuses to remove or replace a file that is open")
	}
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "leases.db")
	db, err := sqlite.OpenDB(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := migrations.Up(ctx, migrations.SQLite, db); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	backup, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b, err := sqlite.Open(ctx, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	rt := protocol.New(b, nil)
	h, err := httpapi.NewHandler(rt, b, &httpapi.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(func() {
		srv.Close()
		if err := rt.Close(context.Background()); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	k := protocol.Key{Namespace: "ns", Name: "k"}
	if _, err := rt.Acquire(ctx, protocol.AcquireRequest{Key: k, Owner: "w", TTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	cursor, err := audit.Tail(ctx, b, audit.Query{Namespace: "ns"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	putback.File(t, path, backup)
	return srv.URL, cursor
}

// TestRestartRequiredCrossesHTTP: a served store that needs a restart (a
// SQLite file put back under it) answers 503 unavailable, as an outage,
// but with error_code restart_required in the body, so that the HTTP
// client's errors match protocol.ErrRestartRequired as the store's own
// do: a follow over HTTP ends on it (as audit.Watch over the store ends)
// instead of reconnecting for ever, and a holder over HTTP stops renewing.
func TestRestartRequiredCrossesHTTP(t *testing.T) {
	t.Parallel()
	base, cursor := servedPutBack(t)

	r := send(t, "POST", base+"/v1/acquire", `{"namespace":"ns","key":"k2","owner":"w","ttl":"1m"}`)
	body := expect(t, "acquire after the put-back", r, 503, "unavailable")
	if body["error_code"] != "restart_required" {
		t.Errorf("acquire after the put-back: body %s; want error_code %q", r.body, "restart_required")
	}
	r = send(t, "GET", base+"/v1/audit?namespace=ns&cursor="+cursor, "")
	body = expect(t, "audit after the put-back", r, 503, "unavailable")
	if body["error_code"] != "restart_required" {
		t.Errorf("audit after the put-back: body %s; want error_code %q", r.body, "restart_required")
	}

	c, err := httpapi.NewClient(base, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err = c.Acquire(ctx, protocol.AcquireRequest{Key: protocol.Key{Namespace: "ns", Name: "k2"}, Owner: "w", TTL: time.Minute,
		RequestID: "r1"})
	if !errors.Is(err, protocol.ErrRestartRequired) || protocol.StatusOf(err) != protocol.StatusUnavailable {
		t.Errorf("client acquire after the put-back: %v; want unavailable matching protocol.ErrRestartRequired", err)
	}
	if _, err := c.ReadAudit(ctx, audit.Query{Namespace: "ns", Cursor: cursor}); !errors.Is(err, protocol.ErrRestartRequired) {
		t.Errorf("client audit read after the put-back: %v; want an error matching protocol.ErrRestartRequired", err)
	}
	if err := c.Health(ctx); !errors.Is(err, protocol.ErrRestartRequired) {
		t.Errorf("client health after the put-back: %v; want an error matching protocol.ErrRestartRequired", err)
	}

	for name, q := range map[string]audit.Query{
		"from a cursor":  {Namespace: "ns", Cursor: cursor},
		"from the start": {Namespace: "ns"},
	} {
		var failures []error
		for _, err := range audit.Watch(ctx, c, q, nil) {
			if err != nil {
				failures = append(failures, err)
			}
			if len(failures) > 3 {
				break
			}
		}
		if ctx.Err() != nil || len(failures) != 1 || !errors.Is(failures[0], protocol.ErrRestartRequired) {
			msgs := make([]string, len(failures))
			for i, f := range failures {
				msgs[i] = f.Error()
			}
			t.Fatalf("follow over HTTP %s after the put-back: %d failures (%s), context %v; want one failure matching "+
				"protocol.ErrRestartRequired, ending the follow", name, len(failures), strings.Join(msgs, " | "), ctx.Err())
		}
	}
}
