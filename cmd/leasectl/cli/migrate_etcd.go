package cli

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/leasestore/leasestore/kvstore/etcd"
	"github.com/leasestore/leasestore/protocol"
)

// etcdFormatSource names the one "migration" of an etcd store: recording
// its format version (the store has no schema; its values carry their
// versions).
func etcdFormatSource() string { return fmt.Sprintf("format %d", etcd.FormatVersion) }

// migrateEtcd runs migrate up, down or status on the etcd store of t. up
// records the format version in a new store, or checks an existing one's
// (a store of another version is refused naming both); status reports it;
// down deletes the store's keys, refused for a store that holds leases or
// records unless destroy.
func (a *app) migrateEtcd(ctx context.Context, t target, direction string, destroy bool) error {
	ctx, cancel := a.opContext(ctx)
	defer cancel()
	cfg := *t.etcd
	cfg.NoInit = true
	start := time.Now()
	b, err := etcd.Open(ctx, &cfg)
	recorded := false
	if errors.Is(err, etcd.ErrNoStore) {
		if direction != "up" {
			return a.printEtcdMigration(t, direction, nil, 0, time.Time{})
		}
		cfg.NoInit, recorded = false, true
		b, err = etcd.Open(ctx, &cfg)
	}
	if err != nil {
		return a.storeError(t, err)
	}
	defer b.Close(context.Background())
	switch direction {
	case "up":
		var done []*gooseResult
		if recorded {
			done = []*gooseResult{{version: etcd.FormatVersion, source: etcdFormatSource(), duration: time.Since(start)}}
		}
		return a.printEtcdMigration(t, direction, done, etcd.FormatVersion, time.Time{})
	case "down":
		leases, records, err := b.Counts(ctx)
		if err != nil {
			return a.storeError(t, err)
		}
		if (leases > 0 || records > 0) && !destroy {
			return &failure{status: string(protocol.StatusInvalid), err: fmt.Errorf(
				"migrate %s: the store holds %d leases and %d audit records: give --destroy-data to delete them with the store", t.shown, leases, records)}
		}
		start := time.Now()
		if _, err := b.Destroy(ctx); err != nil {
			return a.storeError(t, err)
		}
		return a.printEtcdMigration(t, direction, []*gooseResult{{version: etcd.FormatVersion, source: etcdFormatSource(), duration: time.Since(start)}}, 0, time.Time{})
	default:
		created, err := b.Created(ctx)
		if err != nil {
			return a.storeError(t, err)
		}
		return a.printEtcdMigration(t, direction, nil, etcd.FormatVersion, created)
	}
}

// printEtcdMigration prints what migrate did or found on an etcd store;
// for status, created is when its format version was recorded (zero when
// unknown).
func (a *app) printEtcdMigration(t target, direction string, done []*gooseResult, version int64, created time.Time) error {
	if direction == "status" {
		state := "pending"
		applied := ""
		if version > 0 {
			state = "applied"
			if !created.IsZero() {
				applied = timeJSON(created)
			}
		}
		out := migrateStatusJSON{Status: StatusOK, Dialect: string(t.dialect), Version: version, Latest: etcd.FormatVersion,
			Migrations: []migrationStateJSON{{Version: etcd.FormatVersion, Source: etcdFormatSource(), State: state, AppliedAt: applied}}}
		note := "an etcd store has no schema: its format version is recorded in its meta entry"
		if version == 0 {
			note = "no store under this prefix yet: 'leasectl migrate up' (or any lease command) records its format version"
		}
		return a.printMigrateStatus(t, out, note)
	}
	a.printMigrated(t, direction, done, version)
	return nil
}
