package lincheck

import (
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/leasestore/leasestore/protocol"
)

// ClockSlack widens every time comparison of the model: it covers the
// microsecond precision of stored times and the granularity of the clocks.
// It is not meant to cover clock skew (every process of a history runs on
// one machine).
const ClockSlack = time.Millisecond

const slack = int64(ClockSlack)

// state is the model of one key. The zero value is a key never acquired.
type state struct {
	held  bool
	owner string
	// token is the held lease's token; 0 while it was issued by an acquire
	// of unknown outcome and no result has shown it yet (then it is at
	// least issued).
	token int64
	// The held lease's expires_at lies in [expLo, expHi] (Unix ns).
	expLo, expHi int64
	// issued bounds from below the tokens issued for the key so far: the
	// next acquire's token must exceed it.
	issued int64
	// ttl is the held lease's TTL (of its last acquire or renew), which a
	// renew without a TTL keeps; delay its lock-delay (ns).
	ttl, delay int64
	// After a revoke of a lease with a lock-delay (held is false), that
	// lease's owner and token, and the window in which the delay ends:
	// acquires answer conflict, carrying it, until then. A blockToken
	// below 0 is a token no result has shown yet (the lease's acquire's
	// outcome was unknown): it is at least -blockToken, the bound issued
	// was at when that acquire took effect.
	blockOwner     string
	blockToken     int64
	blockLo, block int64
	blockDelay     int64 // that lease's lock-delay (ns)
	// After a sweep removed the held lease's row (held is false), the
	// earliest time that sweep can have run: an acquire after it cannot
	// have returned earlier.
	sweptLo int64
}

// input is a porcupine input: the operation and the interval in which it
// may have taken effect ([start, ret]; ret is past the end of the history
// for an unknown outcome, see Check).
type input struct {
	op         *Operation
	start, ret int64
	sweepGrace int64 // rows of leases that ended this long ago may be gone; -1: none go
	late       int64 // a lease may stay live this long past its expires_at (CheckOptions.LateExpiry)
}

// canSwept tells whether, judged at some instant of in's interval, the held
// lease's row can have been removed by a sweep.
func (s state) canSwept(in input) bool {
	return in.sweepGrace >= 0 && in.ret+slack >= s.sweepableAt(in)
}

// sweepableAt is the earliest time a sweep can remove the held lease's row
// ([protocol.Sweeper]): once it ended more than the grace ago, and not
// before its lock-delay ended (a row whose lock-delay keeps the key is never
// removed). That is what every sweeper guarantees: etcd's removes a lease
// once it ended more than the grace ago and its lock-delay is over; the
// SQL backends' and memstore's wait for the grace to pass after the end of
// the lock-delay (expires_at + lock_delay < now - grace), later still.
func (s state) sweepableAt(in input) int64 {
	return s.expLo + max(in.sweepGrace, s.delay)
}

// swept is the state after a sweep, within in's interval, removed the held
// lease's row: free, the token bound kept, and no acquire after it
// returning before the sweep can have run.
func (s state) swept(in input) state {
	next := s.free()
	next.sweptLo = s.sweepableAt(in)
	return next
}

// liveness tells whether, judged at some instant of in's interval, the held
// lease can have been live, and whether it can have been expired.
func (s state) liveness(in input) (canLive, canExpire bool) {
	return in.start-slack < s.expHi+in.late, in.ret+slack >= s.expLo
}

// keyFree tells whether, judged at some instant of in's interval, an
// acquire can have found the key free: no live lease and no lock-delay
// keeping it.
func (s state) keyFree(in input) bool {
	if s.held {
		return in.ret+slack >= s.expLo+s.delay
	}
	return (s.blockToken == 0 || in.ret+slack >= s.blockLo) && in.ret+slack >= s.sweptLo
}

// canDelayed tells whether, judged at some instant of in's interval, a
// lock-delay can have kept the key (the held lease expired, or a revoked
// one), and sees l, the ended lease a conflict carries.
func (s state) canDelayed(in input, l *Lease) (state, bool) {
	switch {
	case l == nil:
		return s, false
	case s.held:
		if s.delay == 0 || in.ret+slack < s.expLo || in.start-slack >= s.expHi+in.late+s.delay {
			return s, false
		}
		return s.see(l)
	case s.blockToken != 0:
		tokenOK := l.Token == s.blockToken
		if s.blockToken < 0 && l.Token > 0 && l.Token >= -s.blockToken {
			// Not known yet, at least -blockToken: this result shows it.
			tokenOK = true
			s.blockToken, s.issued = l.Token, max(s.issued, l.Token)
		}
		// It carries its lock-delay, and as its expiry the time the revoke
		// ended it (within the revoke's interval).
		endedOK := l.ExpiresAt == 0 ||
			(l.ExpiresAt >= s.blockLo-s.blockDelay-slack && l.ExpiresAt <= s.block-s.blockDelay+slack)
		return s, l.Owner == s.blockOwner && tokenOK && sameDelay(l, s.blockDelay) && endedOK && in.start-slack < s.block+in.late
	}
	return s, false
}

// tokenCan tells which of s.token <, ==, > t are possible.
func (s state) tokenCan(t int64) (less, equal, greater bool) {
	if s.token != 0 {
		return s.token < t, s.token == t, s.token > t
	}
	// Unknown: any value >= s.issued.
	return s.issued < t, s.issued <= t, true
}

// withToken returns s with its token known to be t; ok is false when t is
// impossible.
func (s state) withToken(t int64) (state, bool) {
	if s.token == 0 {
		if t < s.issued || t <= 0 {
			return s, false
		}
		s.token, s.issued = t, t
		return s, true
	}
	return s, s.token == t
}

// see checks that l, a lease carried by a result, is the held row (its
// owner and lock-delay), and learns from it: its token if unknown, its
// exact expiry.
func (s state) see(l *Lease) (state, bool) {
	if l == nil || !s.held || l.Owner != s.owner || !sameDelay(l, s.delay) {
		return s, false
	}
	s, ok := s.withToken(l.Token)
	if !ok {
		return s, false
	}
	if l.ExpiresAt != 0 {
		if l.ExpiresAt < s.expLo-slack || l.ExpiresAt > s.expHi+slack {
			return s, false
		}
		s.expLo, s.expHi = l.ExpiresAt, l.ExpiresAt
	}
	return s, true
}

// sameDelay tells whether l carries the lock-delay delay (ns) as the
// backends store it, in whole microseconds.
// (A replay of a record written before schema 5 answers 0, as documented:
// histories spanning such records are outside this model.)
func sameDelay(l *Lease, delay int64) bool {
	return l.LockDelay == int64(time.Duration(delay).Truncate(time.Microsecond))
}

// expiry returns the window of expires_at for a lease acquired or renewed
// for ttl by in, narrowed to l's expires_at when it says; ok is false when
// that lies outside the window.
func expiry(in input, l *Lease, held state) (lo, hi int64, ok bool) {
	ttl := int64(in.op.TTL)
	if ttl == 0 { // a renew without a TTL keeps the lease's own
		ttl = held.ttl
	}
	lo, hi = in.start+ttl, in.ret+ttl
	if l == nil || l.ExpiresAt == 0 {
		return lo, hi, true
	}
	if l.ExpiresAt < lo-slack || l.ExpiresAt > hi+slack {
		return 0, 0, false
	}
	return l.ExpiresAt, l.ExpiresAt, true
}

// free is the state after a release or revoke: no row, the token bound kept.
func (s state) free() state { return state{issued: s.issued} }

// revoked is the state after a revoke within in's interval: free, and kept
// by the lease's lock-delay if it has one.
func (s state) revoked(in input) state {
	next := s.free()
	if s.delay > 0 {
		next.blockOwner, next.blockToken = s.owner, s.token
		if s.token == 0 {
			// Issued by an acquire of unknown outcome, never shown: at
			// least issued (see state.token).
			next.blockToken = -max(s.issued, 1)
		}
		next.blockLo, next.block, next.blockDelay = in.start+s.delay, in.ret+s.delay, s.delay
	}
	return next
}

// step returns the states that s can move to when in takes effect with
// out (nil: unknown); none when it cannot.
func step(s state, in input, out *Outcome) []state {
	if out == nil || unknownStatus(out.Status) {
		return append([]state{s}, effects(s, in)...)
	}
	if next, ok := stepKnown(s, in, out); ok {
		return []state{next}
	}
	return nil
}

// effects returns the states that an operation of unknown outcome may have
// left if it took effect.
func effects(s state, in input) []state {
	op := in.op
	canLive, _ := s.liveness(in)
	_, eq, _ := s.tokenCan(op.Token)
	holder := s.held && s.owner == op.Owner && eq && canLive
	switch op.Op {
	case protocol.OpAcquire:
		if !s.keyFree(in) {
			return nil
		}
		lo, hi, _ := expiry(in, nil, s)
		return []state{{held: true, owner: op.Owner, expLo: lo, expHi: hi, issued: s.issued + 1,
			ttl: int64(op.TTL), delay: int64(op.LockDelay)}}
	case protocol.OpRenew:
		if !holder {
			return nil
		}
		next, _ := s.withToken(op.Token)
		next.expLo, next.expHi, _ = expiry(in, nil, s)
		if op.TTL != 0 {
			next.ttl = int64(op.TTL)
		}
		return []state{next}
	case protocol.OpRelease:
		if !holder {
			return nil
		}
		next, _ := s.withToken(op.Token)
		return []state{next.free()}
	case protocol.OpRevoke:
		if !s.held || !canLive {
			return nil
		}
		next := s
		if op.Token != 0 {
			var ok bool
			if next, ok = s.withToken(op.Token); !ok {
				return nil
			}
		}
		return []state{next.revoked(in)}
	}
	return nil // get changes nothing
}

// stepKnown is step for an operation whose outcome is known.
func stepKnown(s state, in input, out *Outcome) (state, bool) {
	op := in.op
	canLive, canExpire := s.liveness(in)
	less, eq, greater := s.tokenCan(op.Token)
	l := out.Lease
	// seeIf checks the lease a refusal may carry.
	seeIf := func(s state) (state, bool) {
		if l == nil {
			return s, true
		}
		return s.see(l)
	}
	switch op.Op {
	case protocol.OpAcquire:
		switch out.Status {
		case protocol.StatusAcquired:
			if l == nil || l.Owner != op.Owner || l.Token <= s.issued || !s.keyFree(in) || !sameDelay(l, int64(op.LockDelay)) {
				return s, false
			}
			lo, hi, ok := expiry(in, l, s)
			return state{held: true, owner: op.Owner, token: l.Token, expLo: lo, expHi: hi, issued: l.Token,
				ttl: int64(op.TTL), delay: int64(op.LockDelay)}, ok
		case protocol.StatusConflict:
			if l != nil && s.held && canLive {
				if next, ok := s.see(l); ok {
					return next, true
				}
			}
			return s.canDelayed(in, l)
		}

	case protocol.OpRenew, protocol.OpRelease:
		success := protocol.StatusRenewed
		if op.Op == protocol.OpRelease {
			success = protocol.StatusReleased
		}
		switch out.Status {
		case success:
			if l == nil || l.Owner != op.Owner || l.Token != op.Token || !s.held || s.owner != op.Owner || !canLive ||
				!sameDelay(l, s.delay) {
				return s, false
			}
			if op.Op == protocol.OpRelease {
				// The result carries the lease as it was.
				next, ok := s.see(l)
				return next.free(), ok
			}
			next, ok := s.withToken(op.Token)
			if !ok {
				return s, false
			}
			next.expLo, next.expHi, ok = expiry(in, l, s)
			if op.TTL != 0 {
				next.ttl = int64(op.TTL)
			}
			return next, ok
		case protocol.StatusNotFound:
			if s.held && s.canSwept(in) {
				return s.swept(in), true // the ended lease's row was swept
			}
			return s, !s.held
		case protocol.StatusStaleToken:
			if !s.held || !greater {
				return s, false
			}
			next, ok := seeIf(s)
			return next, ok && (next.token == 0 || next.token > op.Token)
		case protocol.StatusNotOwner:
			if !s.held || !(less || (eq && s.owner != op.Owner)) {
				return s, false
			}
			next, ok := seeIf(s)
			return next, ok && (next.token == 0 || next.token < op.Token || (next.token == op.Token && next.owner != op.Owner))
		case protocol.StatusExpired:
			if !s.held || s.owner != op.Owner || !eq || !canExpire {
				return s, false
			}
			next, ok := s.withToken(op.Token)
			if !ok || l == nil {
				return next, ok
			}
			return next.see(l)
		}

	case protocol.OpRevoke:
		switch out.Status {
		case protocol.StatusRevoked:
			if l == nil || !s.held || !canLive || (op.Token != 0 && l.Token != op.Token) {
				return s, false
			}
			next, ok := s.see(l)
			return next.revoked(in), ok
		case protocol.StatusNotFound:
			switch {
			case !s.held || ((op.Token == 0 || eq) && canExpire):
				return s, true
			case s.canSwept(in):
				// The ended lease's row was swept: whatever token the
				// revoke named, there is no row to compare it with.
				return s.swept(in), true
			}
			return s, false
		case protocol.StatusStaleToken:
			if !s.held || op.Token == 0 || !greater {
				return s, false
			}
			next, ok := seeIf(s)
			return next, ok && (next.token == 0 || next.token > op.Token)
		case protocol.StatusNotOwner:
			if !s.held || op.Token == 0 || !less {
				return s, false
			}
			next, ok := seeIf(s)
			return next, ok && (next.token == 0 || next.token < op.Token)
		}

	case protocol.OpGet:
		switch out.Status {
		case protocol.StatusFound:
			if l == nil || !s.held || !canLive {
				return s, false
			}
			return s.see(l)
		case protocol.StatusNotFound:
			// No live lease. While a lock-delay keeps the key the answer
			// carries the ended lease, as acquire's conflict does; once
			// none can keep it, no lease.
			if l != nil {
				return s.canDelayed(in, l)
			}
			return s, (!s.held || canExpire) && s.keyFree(in)
		}
	}
	return s, false // a status this operation cannot answer
}

// hashState hashes every field of a state (equal states have equal hashes).
func hashState(v any) uint64 {
	s := v.(state)
	h := fnv.New64a()
	var b []byte
	b = strconv.AppendBool(b, s.held)
	b = append(b, 0)
	b = append(b, s.owner...)
	b = append(b, 0)
	b = append(b, s.blockOwner...)
	for _, n := range []int64{s.token, s.expLo, s.expHi, s.issued, s.ttl, s.delay, s.blockToken, s.blockLo, s.block, s.blockDelay, s.sweptLo} {
		b = append(b, 0)
		b = strconv.AppendInt(b, n, 10)
	}
	h.Write(b)
	return h.Sum64()
}

// partitionKey is the key an operation is checked under.
func partitionKey(op *Operation) string { return op.Namespace + "/" + op.Key }

// newModel returns the porcupine model. Times in descriptions are relative
// to base (Unix ns), in milliseconds.
func newModel(base int64) porcupine.Model {
	rel := func(t int64) string {
		return strconv.FormatFloat(float64(t-base)/1e6, 'f', 3, 64) + "ms"
	}
	nm := porcupine.NondeterministicModel{
		Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
			index := map[string]int{}
			var parts [][]porcupine.Operation
			for _, o := range history {
				k := partitionKey(o.Input.(input).op)
				i, ok := index[k]
				if !ok {
					i = len(parts)
					index[k] = i
					parts = append(parts, nil)
				}
				parts[i] = append(parts[i], o)
			}
			return parts
		},
		Init: func() []any { return []any{state{}} },
		Step: func(st, in, out any) []any {
			o, _ := out.(*Outcome)
			next := step(st.(state), in.(input), o)
			res := make([]any, len(next))
			for i, n := range next {
				res[i] = n
			}
			return res
		},
		Hash: hashState,
		DescribeOperation: func(in, out any) string {
			return describeOp(in.(input), outcomeOf(out), rel)
		},
		DescribeState: func(st any) string {
			s := st.(state)
			if !s.held && s.blockToken != 0 {
				tok := strconv.FormatInt(s.blockToken, 10)
				if s.blockToken < 0 {
					tok = fmt.Sprintf("? (>= %d)", -s.blockToken)
				}
				return fmt.Sprintf("free (tokens > %d), lock-delay of %s token %s ends [%s, %s]",
					s.issued, s.blockOwner, tok, rel(s.blockLo), rel(s.block))
			}
			if !s.held && s.sweptLo != 0 {
				return fmt.Sprintf("free (tokens > %d), swept at or after %s", s.issued, rel(s.sweptLo))
			}
			if !s.held {
				return fmt.Sprintf("free (tokens > %d)", s.issued)
			}
			tok := strconv.FormatInt(s.token, 10)
			if s.token == 0 {
				tok = fmt.Sprintf("? (>= %d)", s.issued)
			}
			exp := rel(s.expLo)
			if s.expHi != s.expLo {
				exp = "[" + rel(s.expLo) + ", " + rel(s.expHi) + "]"
			}
			return fmt.Sprintf("held by %s, token %s, expires %s", s.owner, tok, exp)
		},
		DescribeOperationMetadata: func(info any) string {
			if info == nil {
				return ""
			}
			return fmt.Sprint(info)
		},
	}
	return nm.ToModel()
}

func outcomeOf(out any) *Outcome {
	o, _ := out.(*Outcome)
	return o
}

// describeOp renders an operation and its outcome for the visualization.
func describeOp(in input, out *Outcome, rel func(int64) string) string {
	op := in.op
	var b strings.Builder
	fmt.Fprintf(&b, "%s(%s", op.Op, op.Key)
	if op.Owner != "" {
		fmt.Fprintf(&b, ", %s", op.Owner)
	}
	if op.Token != 0 || op.Op == protocol.OpRenew || op.Op == protocol.OpRelease {
		fmt.Fprintf(&b, ", token %d", op.Token)
	}
	if op.TTL != 0 {
		fmt.Fprintf(&b, ", ttl %v", op.TTL)
	}
	if op.LockDelay != 0 {
		fmt.Fprintf(&b, ", lock-delay %v", op.LockDelay)
	}
	b.WriteString(") -> ")
	switch {
	case out == nil:
		b.WriteString("? (never returned)")
	default:
		b.WriteString(string(out.Status))
		if unknownStatus(out.Status) {
			b.WriteString(" (unknown)")
		}
		if out.Replayed {
			b.WriteString(" replayed")
		}
		if l := out.Lease; l != nil {
			fmt.Fprintf(&b, " [%s token %d", l.Owner, l.Token)
			if l.ExpiresAt != 0 {
				fmt.Fprintf(&b, " expires %s", rel(l.ExpiresAt))
			}
			b.WriteString("]")
		}
		if out.Attempts > 1 {
			fmt.Fprintf(&b, " after %d attempts", out.Attempts)
		}
	}
	return b.String()
}
