package audit_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/leasestore/leasestore/audit"
	"github.com/leasestore/leasestore/memstore"
	"github.com/leasestore/leasestore/protocol"
)

// decodeLines parses a JSON handler's output, one object per line, and drops
// the wall-clock "time" attribute.
func decodeLines(t *testing.T, buf *bytes.Buffer) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		if line == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line %q is not JSON: %v", line, err)
		}
		delete(m, slog.TimeKey)
		out = append(out, m)
	}
	return out
}

func TestLogHookThroughRuntime(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	backend := memstore.New(&memstore.Config{Now: func() time.Time { return now }})
	var buf bytes.Buffer
	hook := audit.NewLogHook(slog.New(slog.NewJSONHandler(&buf, nil)), nil)
	rt := protocol.New(backend, &protocol.Config{AuditHook: hook})
	defer rt.Close(ctx)

	key := protocol.Key{Namespace: "scans", Name: "shard-7"}
	acq := protocol.AcquireRequest{Key: key, Owner: "w1", TTL: time.Minute, RequestID: "acq-1"}
	res, err := rt.Acquire(ctx, acq)
	if err != nil {
		t.Fatal(err)
	}
	token := res.Lease.Token
	if res, err := rt.Acquire(ctx, acq); err != nil || !res.Replayed {
		t.Fatalf("retry = %+v, %v; want a replay", res, err)
	}
	if _, err := rt.Acquire(ctx, protocol.AcquireRequest{Key: key, Owner: "w2", TTL: time.Minute, RequestID: "acq-2"}); !errors.Is(err, protocol.ErrConflict) {
		t.Fatalf("competing acquire = %v, want conflict", err)
	}
	now = now.Add(10 * time.Second)
	if _, err := rt.Renew(ctx, protocol.RenewRequest{Key: key, Owner: "w1", Token: token, TTL: 2 * time.Minute, RequestID: "ren-1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := rt.Renew(ctx, protocol.RenewRequest{Key: key, Owner: "w2", Token: token, TTL: time.Minute, RequestID: "ren-2"}); !errors.Is(err, protocol.ErrNotOwner) {
		t.Fatalf("renew by another owner = %v, want not_owner", err)
	}
	if _, err := rt.Release(ctx, protocol.ReleaseRequest{Key: key, Owner: "w1", Token: token, RequestID: "rel-1"}); err != nil {
		t.Fatal(err)
	}
	res, err = rt.Acquire(ctx, protocol.AcquireRequest{Key: key, Owner: "w2", TTL: time.Minute, RequestID: "acq-3"})
	if err != nil {
		t.Fatal(err)
	}
	token2 := res.Lease.Token
	if _, err := rt.Get(ctx, protocol.GetRequest{Key: key}); err != nil {
		t.Fatal(err)
	}
	if _, err := rt.Revoke(ctx, protocol.RevokeRequest{Key: key, Actor: "ops@host", Reason: "stuck worker", RequestID: "rev-1"}); err != nil {
		t.Fatal(err)
	}

	exp1 := now.Add(-10 * time.Second).Add(time.Minute).Format(time.RFC3339Nano)
	exp2 := now.Add(2 * time.Minute).Format(time.RFC3339Nano)
	exp3 := now.Add(time.Minute).Format(time.RFC3339Nano)
	rec := func(op, status, owner string, token int64, reqID, actor, reason, expires string) map[string]any {
		m := map[string]any{
			"level": "INFO", "msg": audit.LogHookMessage,
			"op": op, "status": status, "namespace": "scans", "key": "shard-7", "owner": owner,
			"token": float64(token), "request_id": reqID, "actor": actor, "reason": reason,
		}
		if expires != "" {
			m["expires_at"] = expires
		}
		return m
	}
	want := []map[string]any{
		rec("acquire", "acquired", "w1", token, "acq-1", "w1", "", exp1),
		rec("renew", "renewed", "w1", token, "ren-1", "w1", "", exp2),
		rec("release", "released", "w1", token, "rel-1", "w1", "", exp2),
		rec("acquire", "acquired", "w2", token2, "acq-3", "w2", "", exp3),
		rec("revoke", "revoked", "w2", token2, "rev-1", "ops@host", "stuck worker", exp3),
	}
	got := decodeLines(t, &buf)
	if len(got) != len(want) {
		t.Fatalf("%d log records, want %d (one per state change, none for the replay, conflict, not_owner or get):\n%s", len(got), len(want), buf.String())
	}
	for i := range want {
		if !sameMap(got[i], want[i]) {
			t.Errorf("record %d:\n got %v\nwant %v", i, got[i], want[i])
		}
	}

	// The log agrees with the durable trail the backend wrote.
	page, err := backend.ReadAudit(ctx, audit.Query{})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Records) != len(got) {
		t.Fatalf("the trail has %d records, the log %d", len(page.Records), len(got))
	}
	for i, r := range page.Records {
		g := got[i]
		if string(r.Op) != g["op"] || string(r.Status) != g["status"] || r.Namespace != g["namespace"] ||
			r.Key != g["key"] || r.Owner != g["owner"] || float64(r.Token) != g["token"] ||
			r.RequestID != g["request_id"] || r.Actor != g["actor"] || r.Reason != g["reason"] {
			t.Errorf("trail record %d %+v differs from log record %v", i, r, g)
		}
		if exp, ok := g["expires_at"]; ok != !r.ExpiresAt.IsZero() || (ok && exp != r.ExpiresAt.Format(time.RFC3339Nano)) {
			t.Errorf("trail record %d expires at %v, log record has %v", i, r.ExpiresAt, exp)
		}
	}
}

func sameMap(a, b map[string]any) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func TestLogHookLevel(t *testing.T) {
	ch := protocol.StateChange{
		Op: protocol.OpRelease, Status: protocol.StatusReleased, RequestID: "r", Actor: "w",
		Lease: protocol.Lease{Key: protocol.Key{Namespace: "ns", Name: "k"}, Owner: "w", Token: 3, ExpiresAt: time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)},
	}
	var buf bytes.Buffer
	logger := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo}))

	audit.NewLogHook(logger, &audit.LogHookConfig{Level: slog.LevelDebug}).RecordStateChange(context.Background(), ch)
	if buf.Len() != 0 {
		t.Fatalf("a debug-level hook wrote through an info handler: %s", buf.String())
	}
	audit.NewLogHook(logger, &audit.LogHookConfig{Level: slog.LevelWarn}).RecordStateChange(context.Background(), ch)
	got := decodeLines(t, &buf)
	if len(got) != 1 || got[0]["level"] != "WARN" || got[0]["op"] != "release" {
		t.Fatalf("warn-level hook wrote %v", got)
	}
	if got[0]["expires_at"] != ch.Lease.ExpiresAt.Format(time.RFC3339Nano) {
		t.Errorf("release record has expires_at %v, want the lease's %v", got[0]["expires_at"], ch.Lease.ExpiresAt)
	}
}

func TestLogHookNilLoggerUsesDefault(t *testing.T) {
	var buf bytes.Buffer
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.NewJSONHandler(&buf, nil)))
	defer slog.SetDefault(prev)

	audit.NewLogHook(nil, nil).RecordStateChange(context.Background(), protocol.StateChange{
		Op: protocol.OpAcquire, Status: protocol.StatusAcquired, RequestID: "r", Actor: "w",
		Lease: protocol.Lease{Key: protocol.Key{Namespace: "ns", Name: "k"}, Owner: "w", Token: 1,
			ExpiresAt: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)},
	})
	got := decodeLines(t, &buf)
	if len(got) != 1 || got[0]["msg"] != audit.LogHookMessage || got[0]["expires_at"] != "2030-01-01T00:00:00Z" {
		t.Fatalf("default logger got %v", got)
	}
}
