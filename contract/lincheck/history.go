package lincheck

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"sync"
	"time"

	"github.com/leasestore/leasestore/protocol"
)

// Request is what a client asked for in one logical operation.
type Request struct {
	Op        protocol.Op   `json:"op"` // acquire, renew, release, get or revoke
	Namespace string        `json:"namespace"`
	Key       string        `json:"key"`
	Owner     string        `json:"owner,omitempty"` // acquire, renew, release; the actor of a revoke
	Token     int64         `json:"token,omitempty"` // renew, release; revoke (0: whatever lease is live)
	TTL       time.Duration `json:"ttl,omitempty"`   // acquire, renew (0 for a renew: keep the lease's)
	RequestID string        `json:"request_id,omitempty"`
	LockDelay time.Duration `json:"lock_delay,omitempty"` // acquire
}

// Outcome is how a logical operation ended: its last attempt's result.
type Outcome struct {
	Status   protocol.Status `json:"status"`
	Replayed bool            `json:"replayed,omitempty"`
	Attempts int             `json:"attempts,omitempty"` // calls made with the request id
	Lease    *Lease          `json:"lease,omitempty"`    // the result's lease, nil when it had none
}

// Lease is the part of a result's lease that the model reads.
type Lease struct {
	Owner     string `json:"owner"`
	Token     int64  `json:"token"`
	ExpiresAt int64  `json:"expires_at,omitempty"` // Unix nanoseconds; 0 when the result did not say
	LockDelay int64  `json:"lock_delay,omitempty"` // nanoseconds; 0 for none
}

// LeaseOf returns the model's view of l, nil for nil.
func LeaseOf(l *protocol.Lease) *Lease {
	if l == nil {
		return nil
	}
	v := &Lease{Owner: l.Owner, Token: l.Token, LockDelay: int64(l.LockDelay)}
	if !l.ExpiresAt.IsZero() {
		v.ExpiresAt = l.ExpiresAt.UnixNano()
	}
	return v
}

// Operation is one logical operation of a history.
type Operation struct {
	Process string // who recorded it: one name per OS process (or per run of it)
	Client  int    // the client within the process; a client's operations do not overlap
	Request
	Start   int64    // Unix nanoseconds, before the first attempt
	End     int64    // Unix nanoseconds, after the last attempt; 0 when it never returned
	Outcome *Outcome // nil when it never returned
}

// Unknown reports whether the operation may or may not have taken effect:
// it never returned, or it ended with timeout, unavailable or closed.
func (o Operation) Unknown() bool {
	return o.Outcome == nil || unknownStatus(o.Outcome.Status)
}

func unknownStatus(s protocol.Status) bool {
	return s == protocol.StatusTimeout || s == protocol.StatusUnavailable || s == protocol.StatusClosed
}

// History is a set of operations, from one process or merged from several,
// and the times at which processes were lost (see [History.Lost]). The zero
// value is an empty history. A History is not safe for concurrent use.
type History struct {
	Ops  []Operation
	lost map[string]int64
}

// Len returns the number of operations.
func (h *History) Len() int { return len(h.Ops) }

// Lost records that process, and every statement it sent, was gone at at:
// none of its operations can take effect later. Its operations without an
// outcome (or with an unknown one) then end at at instead of at the end of
// the history. Say so only when it is true: a killed process on an embedded
// store (SQLite) qualifies; on a server the statements of a killed client
// may still run after it died.
func (h *History) Lost(process string, at time.Time) {
	if h.lost == nil {
		h.lost = make(map[string]int64)
	}
	h.lost[process] = at.UnixNano()
}

// Merge adds the operations and lost processes of other to h.
func (h *History) Merge(other *History) {
	h.Ops = append(h.Ops, other.Ops...)
	for p, at := range other.lost {
		if h.lost == nil {
			h.lost = make(map[string]int64)
		}
		h.lost[p] = at
	}
}

// event is one JSON line of a recorded history.
type event struct {
	Ev      string   `json:"ev"` // "call", "return" or "lost"
	Process string   `json:"proc"`
	ID      int64    `json:"id,omitempty"` // the operation's number within its process
	Client  int      `json:"client,omitempty"`
	T       int64    `json:"t"` // Unix nanoseconds
	Req     *Request `json:"req,omitempty"`
	Out     *Outcome `json:"out,omitempty"`
}

// WriteJSON writes h as JSON lines, in the format [Recorder] writes and
// [ReadHistory] reads.
func (h *History) WriteJSON(w io.Writer) error {
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	for i, op := range h.Ops {
		req := op.Request
		if err := enc.Encode(event{Ev: "call", Process: op.Process, ID: int64(i) + 1, Client: op.Client, T: op.Start, Req: &req}); err != nil {
			return err
		}
		if op.Outcome != nil {
			if err := enc.Encode(event{Ev: "return", Process: op.Process, ID: int64(i) + 1, T: op.End, Out: op.Outcome}); err != nil {
				return err
			}
		}
	}
	procs := make([]string, 0, len(h.lost))
	for p := range h.lost {
		procs = append(procs, p)
	}
	sort.Strings(procs)
	for _, p := range procs {
		if err := enc.Encode(event{Ev: "lost", Process: p, T: h.lost[p]}); err != nil {
			return err
		}
	}
	return bw.Flush()
}

// ReadHistory reads the JSON lines of one or more recorders (one reader
// each, or several concatenated) into one history. A final line without a
// newline is ignored when it does not parse: a process killed while writing
// it had not started that operation yet (a call is written before the
// operation starts).
func ReadHistory(rs ...io.Reader) (*History, error) {
	type opKey struct {
		process string
		id      int64
	}
	h := &History{}
	index := make(map[opKey]int)
	for n, r := range rs {
		br := bufio.NewReader(r)
		for line := 1; ; line++ {
			b, err := br.ReadBytes('\n')
			if err != nil && !errors.Is(err, io.EOF) {
				return nil, fmt.Errorf("history: reader %d: %w", n+1, err)
			}
			last := err != nil
			if len(bytes.TrimSpace(b)) == 0 {
				if last {
					break
				}
				continue
			}
			var ev event
			if jerr := json.Unmarshal(b, &ev); jerr != nil {
				if last {
					break // torn by a kill
				}
				return nil, fmt.Errorf("history: reader %d line %d: %w", n+1, line, jerr)
			}
			k := opKey{ev.Process, ev.ID}
			switch ev.Ev {
			case "call":
				if ev.Req == nil {
					return nil, fmt.Errorf("history: reader %d line %d: call without a request", n+1, line)
				}
				if _, dup := index[k]; dup {
					return nil, fmt.Errorf("history: reader %d line %d: operation %s#%d called twice", n+1, line, ev.Process, ev.ID)
				}
				index[k] = len(h.Ops)
				h.Ops = append(h.Ops, Operation{Process: ev.Process, Client: ev.Client, Request: *ev.Req, Start: ev.T})
			case "return":
				i, ok := index[k]
				if !ok || ev.Out == nil || h.Ops[i].Outcome != nil {
					return nil, fmt.Errorf("history: reader %d line %d: return of %s#%d without its call, twice or without an outcome",
						n+1, line, ev.Process, ev.ID)
				}
				h.Ops[i].End, h.Ops[i].Outcome = ev.T, ev.Out
			case "lost":
				h.Lost(ev.Process, time.Unix(0, ev.T))
			default:
				return nil, fmt.Errorf("history: reader %d line %d: unknown event %q", n+1, line, ev.Ev)
			}
			if last {
				break
			}
		}
	}
	return h, nil
}

// ReadHistoryFiles is [ReadHistory] over the named files.
func ReadHistoryFiles(paths ...string) (*History, error) {
	var rs []io.Reader
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("history: %w", err)
		}
		rs = append(rs, bytes.NewReader(b))
	}
	return ReadHistory(rs...)
}

// Recorder records the operations of one process, in memory and, when it
// has a writer, as JSON lines: each call is written before the operation
// starts and each return after it ended, one Write per line, so that a
// process killed at any moment leaves a readable history. It is safe for
// concurrent use.
type Recorder struct {
	process string
	mu      sync.Mutex
	w       io.Writer
	werr    error
	ops     []Operation
}

// NewRecorder returns a recorder for process (a name unique within the
// history: give a restarted process a new one). w may be nil; the recorder
// does not close it.
func NewRecorder(process string, w io.Writer) *Recorder {
	return &Recorder{process: process, w: w}
}

// Process returns the recorder's process name.
func (r *Recorder) Process() string { return r.process }

// Pending is an operation that has been called and has not returned yet.
type Pending struct {
	r *Recorder
	i int
}

// Begin records the call of req by client, now, and returns the handle on
// which to record its return. Call it just before the first attempt.
func (r *Recorder) Begin(client int, req Request) *Pending {
	r.mu.Lock()
	defer r.mu.Unlock()
	i := len(r.ops)
	op := Operation{Process: r.process, Client: client, Request: req, Start: time.Now().UnixNano()}
	r.ops = append(r.ops, op)
	r.write(event{Ev: "call", Process: r.process, ID: int64(i) + 1, Client: client, T: op.Start, Req: &req})
	return &Pending{r: r, i: i}
}

// End records, now, that the operation ended with out. Call it just after
// the last attempt returned, once.
func (p *Pending) End(out Outcome) {
	r := p.r
	r.mu.Lock()
	defer r.mu.Unlock()
	op := &r.ops[p.i]
	op.End = max(time.Now().UnixNano(), op.Start)
	op.Outcome = &out
	r.write(event{Ev: "return", Process: r.process, ID: int64(p.i) + 1, T: op.End, Out: &out})
}

// write writes ev as one line; r.mu is held. The first error is kept.
func (r *Recorder) write(ev event) {
	if r.w == nil || r.werr != nil {
		return
	}
	b, err := json.Marshal(ev)
	if err == nil {
		_, err = r.w.Write(append(b, '\n'))
	}
	if err != nil {
		r.werr = fmt.Errorf("history: write: %w", err)
	}
}

// Err returns the first error writing the JSON lines, if any.
func (r *Recorder) Err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.werr
}

// History returns a copy of the operations recorded so far; those still
// pending have no outcome.
func (r *Recorder) History() *History {
	r.mu.Lock()
	defer r.mu.Unlock()
	h := &History{Ops: make([]Operation, len(r.ops))}
	for i, op := range r.ops {
		if op.Outcome != nil {
			out := *op.Outcome
			op.Outcome = &out
		}
		h.Ops[i] = op
	}
	return h
}
