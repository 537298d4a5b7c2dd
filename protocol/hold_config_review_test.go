package protocol_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/leasestore/leasestore/memstore"
	"github.com/leasestore/leasestore/protocol"
)

// Hold takes a HoldConfig that cannot keep the lease (a renewal interval at
// or above the TTL: the lease runs out before the first renewal) or that
// makes no sense (a negative interval or timeout) as it takes any bad input:
// refused as invalid, naming the field, and nothing acquired. scheduler.New
// refuses its own such durations; Hold instead acquired, never renewed and
// lost the lease at its TTL ("not renewed before it would run out by the
// local clock"), or quietly used the default for a negative value.
func TestHoldRefusesAConfigThatCannotKeepTheLease(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name string
		cfg  protocol.HoldConfig
	}{
		{"RenewEvery above the TTL", protocol.HoldConfig{RenewEvery: time.Second}},
		{"RenewEvery equal to the TTL", protocol.HoldConfig{RenewEvery: 300 * time.Millisecond}},
		{"negative RenewEvery", protocol.HoldConfig{RenewEvery: -time.Second}},
		{"negative RenewTimeout", protocol.HoldConfig{RenewTimeout: -time.Second}},
	} {
		t.Run(c.name, func(t *testing.T) {
			store := protocol.New(memstore.New(nil), nil)
			defer store.Close(ctx)
			key := protocol.Key{Namespace: "ns", Name: "k"}
			h, err := protocol.Hold(ctx, store, protocol.AcquireRequest{Key: key, Owner: "w", TTL: 300 * time.Millisecond}, &c.cfg)
			if err == nil {
				defer h.Release(ctx)
				t.Fatalf("Hold accepted HoldConfig%+v for a TTL of 300ms and acquired the key (token %d); want an invalid error naming the field, nothing acquired",
					c.cfg, h.Token())
			}
			if !errors.Is(err, protocol.ErrInvalid) {
				t.Errorf("Hold's error %v does not match ErrInvalid", err)
			}
			if res, err := store.Get(ctx, protocol.GetRequest{Key: key}); !errors.Is(err, protocol.ErrNotFound) {
				t.Errorf("after the refused Hold the key answers %s (%v), want not_found: nothing acquired", res.Status, err)
			}
		})
	}
}

// Hold's refusal of a HoldConfig writes its durations as users write them
// (1h30m, 2h), as every other message does (durations.Format).
func TestHoldConfigRefusalWritesDurationsAsUsersDo(t *testing.T) {
	ctx := context.Background()
	store := protocol.New(memstore.New(nil), nil)
	defer store.Close(ctx)
	req := protocol.AcquireRequest{Key: protocol.Key{Namespace: "ns", Name: "k"}, Owner: "w", TTL: 90 * time.Minute}
	for cfg, want := range map[protocol.HoldConfig]string{
		{RenewEvery: 2 * time.Hour}:     "renew every: 2h is not shorter than the ttl 1h30m",
		{RenewEvery: -90 * time.Minute}: "renew every: -1h30m is negative",
		{RenewTimeout: -time.Hour}:      "renew timeout: -1h is negative",
	} {
		if _, err := protocol.Hold(ctx, store, req, &cfg); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Hold with HoldConfig%+v: %v; want it to say %q", cfg, err, want)
		}
	}
}
