package scheduler

import "time"

// State is what the scheduler is doing with a target it holds.
type State string

// The states of a held target.
const (
	// StateRunning: the lease is held and the handler runs.
	StateRunning State = "running"
	// StateIdle: the lease is held and the handler returned on its own.
	StateIdle State = "idle"
	// StateHandingOver: the handler was cancelled to rebalance, or because
	// the target left the set; the lease is released once it returns.
	StateHandingOver State = "handing_over"
	// StateStopping: the scheduler is shutting down; the lease is released
	// once the handler returns.
	StateStopping State = "stopping"
	// StateLost: the lease was lost; the handler was cancelled and the
	// target is forgotten once it returns.
	StateLost State = "lost"
)

// Snapshot is a scheduler's view at one moment: what it holds and why.
type Snapshot struct {
	Worker    string
	Namespace string
	// Member reports whether the worker holds its membership lease (it
	// claims targets only then): false until the targets function first
	// answered (the worker joins only then), once the store signalled its end or
	// refused its renewal, and once it was not renewed before it would run
	// out by the local clock, until the worker joins again.
	Member bool
	// Workers, Targets and Share are from the last round: the live
	// workers the worker knows of (the live membership leases the store
	// lists, as every worker counts them, and this worker while it is a
	// member; when the list fails, the others of the last list that
	// answered, and this worker while it is a member), the size of the
	// target set, and the fair share ceil(Targets/Workers), Targets when
	// Workers is 0.
	Workers, Targets, Share int
	// Owned lists every target whose lease the worker holds or is giving
	// up, and every lost one whose handler has not returned yet, sorted by
	// target.
	Owned []Owned
	// LastRound is when the last round ended (local clock); zero before
	// the first.
	LastRound time.Time
	// Problem describes what went wrong in the last round (a store that did
	// not answer, a targets function that failed), "" when nothing did.
	Problem string
}

// Owned is one target in a [Snapshot].
type Owned struct {
	Target string
	Token  int64
	State  State
	// Reason says why the worker holds the target, or why it gives it up.
	Reason string
	// AcquiredAt and ExpiresAt are the lease's, by the store's clock, as of
	// the last successful acquire or renewal.
	AcquiredAt, ExpiresAt time.Time
}

// Count returns how many owned targets are in one of the given states.
func (s Snapshot) Count(states ...State) int {
	n := 0
	for _, o := range s.Owned {
		for _, st := range states {
			if o.State == st {
				n++
				break
			}
		}
	}
	return n
}

// Held returns the targets held and worked on or idle (running or idle),
// sorted: those the worker is not giving up.
func (s Snapshot) Held() []string {
	var out []string
	for _, o := range s.Owned {
		if o.State == StateRunning || o.State == StateIdle {
			out = append(out, o.Target)
		}
	}
	return out
}
