package etcd

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	"github.com/leasestore/leasestore/audit"
	"github.com/leasestore/leasestore/backendkit"
	"github.com/leasestore/leasestore/protocol"
)

// FormatVersion is the version of the stored layout and values this
// release writes and reads: the meta record carries it, and every lease and
// audit value carries the version of its own format (LeaseFormatVersion,
// audit.RecordFormatVersion). A store or value of another version is
// refused with an error naming both.
const FormatVersion = 1

// formatRecord is the value of the meta entry.
type formatRecord struct {
	Format    int    `json:"format"`
	CreatedAt string `json:"created_at,omitempty"`
}

// leaseRecord is the value of an r entry: what acquire and renew set.
type leaseRecord struct {
	V         int   `json:"v"`
	RenewedAt int64 `json:"renewed_at"`           // Unix µs
	ExpiresAt int64 `json:"expires_at"`           // Unix µs
	TTL       int64 `json:"ttl"`                  // ns, as last asked for
	LockDelay int64 `json:"lock_delay,omitempty"` // ns
}

func encodeLease(renewedAt, expiresAt time.Time, ttl, lockDelay time.Duration) string {
	b, _ := json.Marshal(leaseRecord{V: protocol.LeaseFormatVersion, RenewedAt: renewedAt.UnixMicro(),
		ExpiresAt: expiresAt.UnixMicro(), TTL: int64(ttl), LockDelay: int64(lockDelay)})
	return string(b)
}

// delayRecord is the lease a d entry keeps after its expiry value: the
// lease whose end the lock-delay follows, with ExpiresAt its end (planned,
// or the revoke's time).
type delayRecord struct {
	V          int    `json:"v"`
	Owner      string `json:"owner"`
	Token      int64  `json:"token"`
	AcquiredAt int64  `json:"acquired_at"`
	RenewedAt  int64  `json:"renewed_at"`
	ExpiresAt  int64  `json:"expires_at"`
	LockDelay  int64  `json:"lock_delay"`
}

// encodeDelay returns the value of a d entry for l (whose token may be 0
// for an acquire: the reader takes the o entry's then).
func encodeDelay(l protocol.Lease) string {
	b, _ := json.Marshal(delayRecord{V: protocol.LeaseFormatVersion, Owner: l.Owner, Token: l.Token,
		AcquiredAt: micro(l.AcquiredAt), RenewedAt: micro(l.RenewedAt), ExpiresAt: micro(l.ExpiresAt), LockDelay: int64(l.LockDelay)})
	return expiryValue(l.FreeAt()) + string(b)
}

func decodeDelay(k protocol.Key, v []byte) (protocol.Lease, error) {
	if len(v) < expiryLen {
		return protocol.Lease{}, fmt.Errorf("lock-delay entry is malformed")
	}
	var r delayRecord
	if err := json.Unmarshal(v[expiryLen:], &r); err != nil {
		return protocol.Lease{}, fmt.Errorf("lock-delay entry is malformed: %w", err)
	}
	if r.V != protocol.LeaseFormatVersion {
		return protocol.Lease{}, fmt.Errorf("lock-delay entry has format version %d; this release reads version %d", r.V, protocol.LeaseFormatVersion)
	}
	return protocol.Lease{Key: k, Owner: r.Owner, Token: r.Token, AcquiredAt: fromMicro(r.AcquiredAt), RenewedAt: fromMicro(r.RenewedAt),
		ExpiresAt: fromMicro(r.ExpiresAt), LockDelay: time.Duration(r.LockDelay), Version: r.V}, nil
}

func decodeLease(v []byte) (leaseRecord, error) {
	var r leaseRecord
	if err := json.Unmarshal(v, &r); err != nil {
		return r, fmt.Errorf("lease record is malformed: %w", err)
	}
	if r.V != protocol.LeaseFormatVersion {
		return r, fmt.Errorf("lease record has format version %d; this release reads version %d", r.V, protocol.LeaseFormatVersion)
	}
	return r, nil
}

// auditValue is the value of an audit entry. Token is 0 in the records of
// acquires, whose token is the record's own revision (unknown until the
// transaction commits). Sum is a checksum of the key and every other
// field (see checksum). LockDelay, the lease's, is omitted when zero, so
// records written before it was added keep their checksums.
type auditValue struct {
	V          int             `json:"v"`
	At         int64           `json:"at"` // Unix µs
	Op         protocol.Op     `json:"op"`
	Namespace  string          `json:"ns"`
	Key        string          `json:"key"`
	Owner      string          `json:"owner"`
	Token      int64           `json:"token,omitempty"`
	RequestID  string          `json:"rid"`
	Actor      string          `json:"actor"`
	Reason     string          `json:"reason,omitempty"`
	Status     protocol.Status `json:"status"`
	ExpiresAt  int64           `json:"expires_at,omitempty"`
	AcquiredAt int64           `json:"acquired_at,omitempty"`
	RenewedAt  int64           `json:"renewed_at,omitempty"`
	LockDelay  int64           `json:"lock_delay,omitempty"` // µs; absent when zero, as in every record written before it
	Params     string          `json:"params,omitempty"`
	Sum        string          `json:"sum"`
}

// encodeAudit returns the value of the audit entry at key for rec.
func encodeAudit(key string, rec backendkit.Recorded) string {
	v := auditValue{V: audit.RecordFormatVersion, At: rec.At.UnixMicro(), Op: rec.Op, Namespace: rec.Namespace,
		Key: rec.Key, Owner: rec.Owner, Token: rec.Token, RequestID: rec.RequestID, Actor: rec.Actor, Reason: rec.Reason,
		Status: rec.Status, ExpiresAt: micro(rec.ExpiresAt), AcquiredAt: micro(rec.AcquiredAt), RenewedAt: micro(rec.RenewedAt),
		LockDelay: rec.LockDelay.Microseconds(), Params: rec.ParamsHash}
	v.Sum = checksum(key, v)
	b, _ := json.Marshal(v)
	return string(b)
}

// checksum is the first 128 bits of SHA-256 over the entry's key and its
// value without the sum: an edit of a record that does not recompute it is
// detected when the record is read. It is no signature: whoever may write
// the prefix can recompute it (see DESIGN.md, etcd backend).
func checksum(key string, v auditValue) string {
	v.Sum = ""
	b, _ := json.Marshal(v)
	h := sha256.New()
	h.Write([]byte(key))
	h.Write([]byte{0})
	h.Write(b)
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// errTampered marks an audit record that fails its checksum.
type errTampered struct{ key string }

func (e *errTampered) Error() string {
	return fmt.Sprintf("audit record %q fails its checksum: it was changed outside leasestore", e.key)
}

// errDestroyed marks a deletion of the trail's records by Destroy (the
// destroy mark put in the same revision), which a follower meets: it
// matches ErrNoStore.
type errDestroyed struct{ rev int64 }

func (e *errDestroyed) Error() string {
	return fmt.Sprintf("the store's records were deleted at revision %d by its destruction (leasectl migrate down --destroy-data)", e.rev)
}

func (e *errDestroyed) Unwrap() error { return ErrNoStore }

// decodeAudit reads the audit entry key (created at revision rev).
func decodeAudit(key string, value []byte, rev int64) (backendkit.Recorded, error) {
	var v auditValue
	if err := json.Unmarshal(value, &v); err != nil {
		return backendkit.Recorded{}, fmt.Errorf("audit record %q is malformed: %w", key, err)
	}
	if v.V != audit.RecordFormatVersion {
		return backendkit.Recorded{}, fmt.Errorf("audit record %q has format version %d; this release reads version %d",
			key, v.V, audit.RecordFormatVersion)
	}
	if v.Sum != checksum(key, v) {
		return backendkit.Recorded{}, &errTampered{key: key}
	}
	token := v.Token
	if v.Op == protocol.OpAcquire {
		token = rev
	}
	return backendkit.Recorded{
		Record: audit.Record{ID: rev, At: fromMicro(v.At), Op: v.Op, Namespace: v.Namespace, Key: v.Key, Owner: v.Owner,
			Token: token, RequestID: v.RequestID, Actor: v.Actor, Reason: v.Reason, Status: v.Status, Version: v.V,
			ExpiresAt: fromMicro(v.ExpiresAt)},
		ParamsHash: v.Params,
		AcquiredAt: fromMicro(v.AcquiredAt),
		RenewedAt:  fromMicro(v.RenewedAt),
		LockDelay:  time.Duration(v.LockDelay) * time.Microsecond,
	}, nil
}

func micro(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMicro()
}

func fromMicro(us int64) time.Time {
	if us == 0 {
		return time.Time{}
	}
	return time.UnixMicro(us).UTC()
}
