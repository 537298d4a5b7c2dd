package etcd

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/leasestore/leasestore/protocol"
)

// The store's layout under its prefix P (every key of one store starts
// with P; several stores share a cluster under different prefixes):
//
//	P/meta                         the store's format record (formatRecord)
//	P/rev                          the revision mark: the greatest revision (20
//	                               digits) the store's processes had seen, or the
//	                               token they changed, when they last changed a
//	                               lease; raised (never lowered) by each change's
//	                               transaction, so always below the cluster's
//	                               revision unless the keys were copied into
//	                               another cluster (revision.go)
//	P/k/NS\x00NAME\x00o            owner NUL acquired_at: written by acquire only,
//	                               so its ModRevision is the lease's fencing token
//	P/k/NS\x00NAME\x00r            renewal record (leaseRecord): acquire and renew
//	P/k/NS\x00NAME\x00e            liveness: expiry (20 digits of Unix µs), attached
//	                               to an etcd lease; gone once the etcd lease expires
//	P/k/NS\x00NAME\x00d            lock-delay, for a lease that has one: the time the
//	                               key is free (20 digits) and the lease (delayRecord),
//	                               attached to an etcd lease that lives that long;
//	                               written by acquire and renew (expiry + delay) and
//	                               revoke (now + delay), deleted by release
//	P/a/NS\x00REQUEST-ID           one audit record (auditRecord), also the
//	                               idempotency record of (NS, REQUEST-ID); its
//	                               CreateRevision is the record's id
//	P/a/\x01prune                  put by every prune batch: the mark that a
//	                               deletion of records in that revision is a prune's
//	P/a/\x01pruned\x01NS           the greatest id (20 digits) a prune removed in NS;
//	                               NS "" the greatest of the whole trail. Raised by
//	                               the prune batch that removes it; a read from a
//	                               cursor below it fails (audit.ErrPruned)
//	P/a/\x01claim\x01REQUEST-ID     a prune's claim on its request id: put by its
//	                               first batch (which finds it absent), compared by
//	                               the next, deleted by the last with the prune's
//	                               record, so that of two prunes with one request
//	                               id only one removes records
//	P/a/\x01destroy                put by every transaction of Destroy: the mark that a
//	                               deletion of records in that revision is Destroy's
//	                               (a follower ends with ErrNoStore, not ErrTampered);
//	                               deleted by Destroy once it is done, or else by
//	                               the transaction that next creates the store
//
//	Every entry of P/a/ that is no record begins P/a/\x01 (a namespace holds
//	no control character).
//
// Names, namespaces and request ids hold no control characters
// (protocol.Key.Validate), so NUL separates them unambiguously, and a key's
// entries sort together, in name order, before the next name's.
const (
	sep        = "\x00"
	suffixO    = sep + "o"
	suffixR    = sep + "r"
	suffixE    = sep + "e"
	suffixD    = sep + "d"
	pruneMark  = "\x01prune"
	prunedTo   = "\x01pruned\x01" // no NUL: parseAuditKey tells it from a record
	expiryLen  = 20               // digits of an expiry value
	metaSuffix = "meta"
	markSuffix = "rev"
	claimed    = "\x01claim\x01"
	destroying = "\x01destroy"
)

// canonicalPrefix is the one form of a store's prefix p, whatever slashes
// p begins and ends with: one "/" at each end ("leasestore", "/leasestore"
// and "//leasestore/" are all "/leasestore/"), so that a Config and a DSN
// naming the same prefix open the same store. Slashes inside p stay.
func canonicalPrefix(p string) string { return "/" + strings.Trim(p, "/") + "/" }

// layout names the keys of one store.
type layout struct{ prefix string } // ends with "/"

func newLayout(prefix string) layout {
	if !strings.HasSuffix(prefix, "/") {
		prefix += "/"
	}
	return layout{prefix: prefix}
}

func (l layout) meta() string                      { return l.prefix + metaSuffix }
func (l layout) revMark() string                   { return l.prefix + markSuffix }
func (l layout) leases() string                    { return l.prefix + "k/" }
func (l layout) namespace(ns string) string        { return l.leases() + ns + sep }
func (l layout) lease(k protocol.Key) string       { return l.namespace(k.Namespace) + k.Name + sep }
func (l layout) audits() string                    { return l.prefix + "a/" }
func (l layout) auditsOf(ns string) string         { return l.audits() + ns + sep }
func (l layout) audit(ns, requestID string) string { return l.auditsOf(ns) + requestID }
func (l layout) pruneMark() string                 { return l.audits() + pruneMark }
func (l layout) prunedThrough(ns string) string    { return l.audits() + prunedTo + ns }
func (l layout) claim(requestID string) string     { return l.audits() + claimed + requestID }
func (l layout) destroyMark() string               { return l.audits() + destroying }

// parseLeaseKey splits an entry key of the lease family into its lease key
// and suffix (one of suffixO, suffixR, suffixE).
func (l layout) parseLeaseKey(key string) (protocol.Key, string, bool) {
	rest, ok := strings.CutPrefix(key, l.leases())
	if !ok || len(rest) < 2 {
		return protocol.Key{}, "", false
	}
	suffix := rest[len(rest)-2:]
	ns, name, ok := strings.Cut(rest[:len(rest)-2], sep)
	if !ok || (suffix != suffixO && suffix != suffixR && suffix != suffixE && suffix != suffixD) {
		return protocol.Key{}, "", false
	}
	return protocol.Key{Namespace: ns, Name: name}, suffix, true
}

// parseAuditKey returns the namespace and request id of an audit key.
func (l layout) parseAuditKey(key string) (ns, requestID string, ok bool) {
	rest, ok := strings.CutPrefix(key, l.audits())
	if !ok {
		return "", "", false
	}
	return strings.Cut(rest, sep)
}

// ownAuditKey reports whether key, of the trail's family, is the store's:
// a record (parseAuditKey), the prune mark, a mark of what prunes removed
// or the claim of a prune under way. The destroy mark is not: Destroy's
// range deletions go around it (it puts it in the same transactions).
func (l layout) ownAuditKey(key string) bool {
	if _, _, ok := l.parseAuditKey(key); ok {
		return true
	}
	rest, ok := strings.CutPrefix(key, l.audits())
	return ok && (rest == pruneMark || strings.HasPrefix(rest, prunedTo) || strings.HasPrefix(rest, claimed))
}

// expiryValue encodes t as the value of an e entry: fixed-width decimal
// Unix microseconds, so that etcd's byte-wise compare orders expiries.
func expiryValue(t time.Time) string {
	return fmt.Sprintf("%0*d", expiryLen, max(t.UnixMicro(), 0))
}

// ownerValue is the value of an o entry: the owner, NUL, acquired_at.
func ownerValue(owner string, acquiredAt time.Time) string {
	return owner + sep + expiryValue(acquiredAt)
}

// parseOwnerValue splits an o entry's value.
func parseOwnerValue(v string) (owner string, acquiredAt time.Time, err error) {
	owner, at, ok := strings.Cut(v, sep)
	if !ok || len(at) != expiryLen {
		return "", time.Time{}, fmt.Errorf("owner entry %q is malformed", v)
	}
	us, err := strconv.ParseInt(at, 10, 64)
	if err != nil {
		return "", time.Time{}, fmt.Errorf("owner entry %q is malformed", v)
	}
	return owner, time.UnixMicro(us).UTC(), nil
}
