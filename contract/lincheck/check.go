package lincheck

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"time"

	"github.com/anishathalye/porcupine"
)

// DefaultCheckTimeout bounds porcupine's search when [CheckOptions] gives
// no timeout.
const DefaultCheckTimeout = time.Minute

// CheckOptions tunes [Check]. A nil *CheckOptions means all defaults.
type CheckOptions struct {
	// Name goes into the names of the files written on failure (a test's
	// name, say). Default: "history".
	Name string
	// Dir is where the visualization and the history are written when the
	// check fails. It should outlive the test. Default: os.TempDir().
	Dir string
	// Timeout bounds the search; a search that runs out of time is a
	// failure. Default: [DefaultCheckTimeout].
	Timeout time.Duration
	// Sweeping says that rows of ended leases may be removed while the
	// history runs ([protocol.Sweeper]) once they ended more than
	// SweepGrace ago and their lock-delay, if any, is over: a renew or
	// release by a lease's holder may then answer not_found instead of
	// expired. Default: false.
	Sweeping   bool
	SweepGrace time.Duration
	// LateExpiry says that a lease may stay live for up to this long after
	// its expires_at, never less long: the store's expiry is judged by a
	// clock other than the one that stamped expires_at, which only errs
	// late (etcd's leases, kept by the cluster's leader in whole seconds).
	// A holder that stops at expires_at stays safe; a waiter may wait
	// longer. Default: 0, the lease ends at its expires_at.
	LateExpiry time.Duration
}

// Result describes a checked history.
type Result struct {
	Operations int           // logical operations in the history
	Unknown    int           // of which may or may not have taken effect
	Keys       int           // partitions: distinct keys
	Clients    int           // distinct (process, client) pairs
	Elapsed    time.Duration // time porcupine took
	// Visualization and History name the files written when the check
	// failed: porcupine's HTML visualization and the history as JSON lines
	// (readable with [ReadHistoryFiles]). Empty when it passed.
	Visualization string
	History       string
}

// String summarises r on one line.
func (r Result) String() string {
	return fmt.Sprintf("%d operations (%d of unknown outcome) on %d keys from %d clients, checked in %v",
		r.Operations, r.Unknown, r.Keys, r.Clients, r.Elapsed.Round(time.Millisecond))
}

// ErrNotLinearizable is matched (errors.Is) by the error of [Check] when
// porcupine found no linearization.
var ErrNotLinearizable = errors.New("lincheck: history is not linearizable")

// Check runs porcupine on h with the lease model. It returns an error when
// h is empty, not linearizable, or the search ran out of time; then it
// writes porcupine's visualization and the history to files in
// opts.Dir and names both in the error (and in the result).
//
// An operation of unknown outcome may take effect anywhere from its start
// to the end of the history, or to the time its process was lost
// ([History.Lost]).
func Check(h *History, opts *CheckOptions) (Result, error) {
	if opts == nil {
		opts = &CheckOptions{}
	}
	timeout := opts.Timeout
	if timeout <= 0 {
		timeout = DefaultCheckTimeout
	}
	res := Result{Operations: h.Len()}
	if h.Len() == 0 {
		return res, errors.New("lincheck: the history is empty")
	}
	sweepGrace := int64(-1)
	if opts.Sweeping {
		sweepGrace = int64(opts.SweepGrace)
	}
	ops, base := h.porcupine(&res, sweepGrace, int64(opts.LateExpiry))
	model := newModel(base)
	start := time.Now()
	verdict, info := porcupine.CheckOperationsVerbose(model, ops, timeout)
	res.Elapsed = time.Since(start)
	if verdict == porcupine.Ok {
		return res, nil
	}
	files, werr := writeFailure(h, model, info, opts)
	res.Visualization, res.History = files[0], files[1]
	where := fmt.Sprintf("visualization %s, history %s", res.Visualization, res.History)
	if werr != nil {
		where = fmt.Sprintf("could not write the visualization and history: %v", werr)
	}
	if verdict == porcupine.Illegal {
		return res, fmt.Errorf("%w: %s; %s", ErrNotLinearizable, res, where)
	}
	return res, fmt.Errorf("lincheck: the search ran out of time (%v): %s; %s", timeout, res, where)
}

// porcupine converts h to porcupine operations and fills res's counts. It
// returns the operations and the earliest start. sweepGrace is the
// SweepGrace of CheckOptions in nanoseconds, or -1 when nothing sweeps;
// late is LateExpiry in nanoseconds.
func (h *History) porcupine(res *Result, sweepGrace, late int64) ([]porcupine.Operation, int64) {
	base, horizon := h.Ops[0].Start, h.Ops[0].Start
	for _, op := range h.Ops {
		base = min(base, op.Start)
		horizon = max(horizon, op.Start, op.End)
	}
	for _, at := range h.lost {
		horizon = max(horizon, at)
	}
	horizon++

	type clientKey struct {
		process string
		client  int
	}
	var clients []clientKey
	seen := map[clientKey]bool{}
	keys := map[string]bool{}
	for i := range h.Ops {
		op := &h.Ops[i]
		if c := (clientKey{op.Process, op.Client}); !seen[c] {
			seen[c] = true
			clients = append(clients, c)
		}
		keys[partitionKey(op)] = true
	}
	sort.Slice(clients, func(i, j int) bool {
		if clients[i].process != clients[j].process {
			return clients[i].process < clients[j].process
		}
		return clients[i].client < clients[j].client
	})
	clientID := make(map[clientKey]int, len(clients))
	for i, c := range clients {
		clientID[c] = i
	}
	res.Keys, res.Clients = len(keys), len(clients)

	ops := make([]porcupine.Operation, len(h.Ops))
	for i := range h.Ops {
		op := &h.Ops[i]
		ret := max(op.End, op.Start)
		if op.Unknown() {
			res.Unknown++
			ret = horizon
			if at, ok := h.lost[op.Process]; ok {
				ret = max(at, op.End, op.Start)
			}
		}
		meta := fmt.Sprintf("%s client %d, request id %s", op.Process, op.Client, op.RequestID)
		ops[i] = porcupine.Operation{
			ClientId: clientID[clientKey{op.Process, op.Client}],
			Input:    input{op: op, start: op.Start, ret: ret, sweepGrace: sweepGrace, late: late},
			Call:     op.Start,
			Output:   op.Outcome,
			Return:   ret,
			Metadata: meta,
		}
	}
	return ops, base
}

var unsafeName = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// writeFailure writes the visualization and the history; it returns their
// paths (empty where writing failed).
func writeFailure(h *History, model porcupine.Model, info porcupine.LinearizationInfo, opts *CheckOptions) ([2]string, error) {
	var paths [2]string
	dir := opts.Dir
	if dir == "" {
		dir = os.TempDir()
	}
	name := opts.Name
	if name == "" {
		name = "history"
	}
	prefix := "lincheck-" + unsafeName.ReplaceAllString(name, "_") + "-"
	viz, err := os.CreateTemp(dir, prefix+"*.html")
	if err != nil {
		return paths, err
	}
	err = viz.Chmod(0o644)
	if err == nil {
		err = porcupine.Visualize(model, info, viz)
	}
	if cerr := viz.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return paths, fmt.Errorf("visualization: %w", err)
	}
	paths[0] = viz.Name()
	hist, err := os.Create(filepath.Join(dir, filepath.Base(viz.Name()[:len(viz.Name())-len(".html")])+".jsonl"))
	if err != nil {
		return paths, err
	}
	err = h.WriteJSON(hist)
	if cerr := hist.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return paths, fmt.Errorf("history: %w", err)
	}
	paths[1] = hist.Name()
	return paths, nil
}
